package mrexec

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// UIDRange is a range of OS uids that no account of the host uses. With
// one (TaskUser.UIDs), every attempt's commands run as a uid of the range
// that no other attempt on the host uses meanwhile, with the same number
// as their only group: the tasks of one job cannot reach those of
// another (read their environment, input and output in /proc, signal
// them), which one shared account allows. When the attempt ends, every
// process of its uid is killed (also those that left its session), so
// nothing it started waits for the next user of the uid.
//
// Task servers of one host share the range: a lock file per uid in use,
// in LockDir, says which are taken.
type UIDRange struct {
	First, Count uint32
	LockDir      string
}

// DefaultUIDs is the range task servers use unless told otherwise: high
// uids, which accounts do not use (each is checked against the account
// database before it is taken).
const DefaultUIDs = "1600000000-1600065535"

// ParseUIDRange reads FIRST-LAST.
func ParseUIDRange(s string) (*UIDRange, error) {
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.ParseUint(a, 10, 32)
	last, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil || first == 0 || last < first || last >= 1<<32-1 {
		return nil, fmt.Errorf("uid range %q: want FIRST-LAST, two uids above 0 (e.g. %s)", s, DefaultUIDs)
	}
	dir := "/run/plasma-task-uids"
	if st, err := os.Stat("/run"); err != nil || !st.IsDir() {
		dir = filepath.Join(os.TempDir(), "plasma-task-uids")
	}
	if err := privateDir(dir); err != nil {
		return nil, fmt.Errorf("uid range lock directory: %w", err)
	}
	return &UIDRange{First: uint32(first), Count: uint32(last - first + 1), LockDir: dir}, nil
}

// privateDir makes dir (0700) unless it is there, and checks that it is
// a directory of this process's user that nobody else may write in.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s is not a directory of uid %d that only it may write in: remove it", dir, os.Geteuid())
	}
	return nil
}

// attemptAccount is the OS account one attempt's commands run as.
type attemptAccount struct {
	*TaskUser
	lock *os.File // the uid's lock file (nil: the shared account)
}

// attemptAccount takes a uid of u's range for one attempt; without a
// range, every attempt runs as u itself.
func (u *TaskUser) attemptAccount() (*attemptAccount, error) {
	r := u.UIDs
	if r == nil {
		return &attemptAccount{TaskUser: u}, nil
	}
	for i := uint32(0); i < r.Count; i++ {
		uid := r.First + i
		lock, err := os.OpenFile(filepath.Join(r.LockDir, strconv.FormatUint(uint64(uid), 10)), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, fmt.Errorf("task uid %d: %w", uid, err)
		}
		if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			lock.Close() // another attempt's
			continue
		}
		if _, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
			lock.Close() // an account's
			continue
		}
		a := &attemptAccount{TaskUser: &TaskUser{Name: u.Name, UID: uid, GID: uid, WorkBase: u.WorkBase}, lock: lock}
		// What an attempt of a task server that died left running.
		if err := a.killAll(); err != nil {
			lock.Close()
			return nil, err
		}
		return a, nil
	}
	return nil, fmt.Errorf("all %d task uids from %d are in use", r.Count, r.First)
}

// killAll kills every process of the attempt's uid (none with the shared
// account: they might be anyone's).
func (a *attemptAccount) killAll() error {
	if a.lock == nil {
		return nil
	}
	// kill(-1) signals every process the caller may signal, that is of
	// its uid, but the caller.
	cmd := exec.Command("/bin/sh", "-c", "kill -KILL -1 2>/dev/null; exit 0")
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.credential()}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("killing the processes of task uid %d: %v %s", a.UID, err, out)
	}
	return nil
}

// release kills what is left of the attempt and gives its uid back.
func (a *attemptAccount) release() {
	if a.lock != nil {
		a.killAll()
		a.lock.Close()
	}
}
