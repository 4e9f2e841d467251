package vfs

import (
	"context"
	"errors"
	"syscall"

	"github.com/plasmafs/plasma/client"
)

// Errno maps an error of the client library (or of this package) to the
// errno a frontend returns. It is the only place that does; nil gives 0.
func Errno(err error) syscall.Errno {
	var en syscall.Errno
	switch {
	case err == nil:
		return 0
	case errors.As(err, &en):
		return en
	case errors.Is(err, client.ErrNotFound):
		return syscall.ENOENT
	case errors.Is(err, client.ErrExists):
		return syscall.EEXIST
	case errors.Is(err, client.ErrNotEmpty):
		return syscall.ENOTEMPTY
	case errors.Is(err, client.ErrPermission):
		return syscall.EACCES
	case errors.Is(err, client.ErrConflict):
		// Another transaction holds the inode or entry (after the
		// retries of metadata operations), or changed a file's data
		// first (first committer wins): the operation did nothing.
		return syscall.EBUSY
	case errors.Is(err, client.ErrNoSpace):
		return syscall.ENOSPC
	case errors.Is(err, client.ErrNameTooLong):
		return syscall.ENAMETOOLONG
	case errors.Is(err, client.ErrNotDir):
		return syscall.ENOTDIR
	case errors.Is(err, client.ErrIsDir):
		return syscall.EISDIR
	case errors.Is(err, client.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, client.ErrLoop):
		return syscall.ELOOP
	case errors.Is(err, ErrStale):
		return syscall.ESTALE
	case errors.Is(err, ErrReadOnly):
		return syscall.EROFS
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	default:
		// ErrCommitUnknown, ErrTxn, ErrUnavailable, ErrChecksum,
		// ErrInternal, lost connections: the caller cannot tell what
		// happened, as after a failed disk write.
		return syscall.EIO
	}
}

// Errors of this package (besides syscall.Errno values, which Errno
// passes through).
var (
	// ErrStale: the handle's file is gone (its data was committed while
	// it had no other name, or another client removed it).
	ErrStale = errors.New("stale file handle")
	// ErrReadOnly: the mount is read-only.
	ErrReadOnly = errors.New("read-only file system")
)
