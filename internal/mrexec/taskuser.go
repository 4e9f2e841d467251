package mrexec

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// TaskUser is the unprivileged OS account a task server runs task
// commands as, so that a task reads none of the task server's files (its
// credential, the cluster's secrets) and nothing else only root may read.
// Each attempt gets a fresh working directory of its own, owned by the
// account and removed when the attempt ends.
type TaskUser struct {
	Name     string
	UID, GID uint32
	// WorkBase is where the attempts' working directories go.
	WorkBase string
	// UIDs, if set, gives each attempt a uid of its own (taskuids.go);
	// otherwise all run as UID and can reach each other's processes.
	UIDs *UIDRange
}

// LookupTaskUser finds the OS account name (its primary group is the
// commands' only group).
func LookupTaskUser(name, workBase string) (*TaskUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("task user: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("task user %s: uid %q gid %q are not numbers", name, u.Uid, u.Gid)
	}
	if uid == 0 {
		return nil, fmt.Errorf("task user %s is root: tasks would read every secret of the host", name)
	}
	return &TaskUser{Name: name, UID: uint32(uid), GID: uint32(gid), WorkBase: workBase}, nil
}

// workDir makes an attempt's working directory and its log
// subdirectory, both owned by the account (0700), and returns the
// directory open (localdir.go). The log directory is made and given away
// while the directory is still root's alone, so that no process of the
// account can put a link where root changes an owner.
func (u *TaskUser) workDir(attempt string) (*os.File, error) {
	dir, err := os.MkdirTemp(u.WorkBase, "plasma-task-"+attempt+"-")
	if err != nil {
		return nil, fmt.Errorf("task working directory: %w", err)
	}
	d, err := makeLocalLog(dir)
	if err == nil {
		if err = os.Lchown(filepath.Join(dir, localLogName), int(u.UID), int(u.GID)); err == nil {
			err = d.Chown(int(u.UID), int(u.GID))
		}
		if err != nil {
			d.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("task working directory %s: %w", dir, err)
	}
	return d, nil
}

// credential is what the commands run with: the account's uid and gid
// and no supplementary groups.
func (u *TaskUser) credential() *syscall.Credential {
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}
}

// environ is the task server's environment for a command, without what
// names the task server's own PlasmaFS configuration and credential, and
// with the account's home and temporary directory in dir.
func (u *TaskUser) environ(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "PLASMAFS_"), strings.HasPrefix(name, "PLASMAMR_"),
			name == "HOME", name == "TMPDIR", name == "USER", name == "LOGNAME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+dir, "TMPDIR="+dir, "USER="+u.Name, "LOGNAME="+u.Name)
}
