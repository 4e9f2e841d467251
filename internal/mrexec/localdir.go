package mrexec

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// An attempt's local directory belongs to the account its commands run
// as, which may move it or replace anything in it with a link (to a
// directory or file of root's) at any time, even after its command has
// ended (a process it left behind). The task server, which may be root,
// therefore reads the log files through the directory it opened when it
// made it, never through a path, follows no link, and copies only
// regular files of the account.

// localLogName is the local directory's subdirectory whose files go to
// the job's log directory (PLASMAMR_LOCAL_LOG_DIR).
const localLogName = "log"

// makeLocalLog makes dir's log subdirectory and returns dir open.
func makeLocalLog(dir string) (*os.File, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(dir, localLogName), 0o700); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// openLocalLog opens the log subdirectory of the open local directory d,
// refusing a link.
func openLocalLog(d *os.File) (*os.File, error) {
	fd, err := unix.Openat(int(d.Fd()), localLogName, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(d.Name(), localLogName), err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(d.Name(), localLogName)), nil
}

// openLogFile opens file name of the open log directory dir for reading
// if it is a regular file (not a link, nor a FIFO that would block) of
// the account u (any owner when u is nil: the commands ran as this
// process); otherwise it says why not.
func openLogFile(dir *os.File, name string, u *TaskUser) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir.Name(), name))
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("%s is not a regular file", name)
	case u != nil && st.Uid != u.UID:
		err = fmt.Errorf("%s is not the task account's (a link to another's file)", name)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
