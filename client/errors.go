package client

import (
	"errors"
	"io/fs"

	"github.com/plasmafs/plasma/internal/wire"
)

// Sentinel errors. Match them with errors.Is; ErrNotFound, ErrExists and
// ErrPermission also match fs.ErrNotExist, fs.ErrExist and fs.ErrPermission.
var (
	ErrConflict    = errors.New("conflict with another transaction")
	ErrNotFound    = errors.New("no such file or directory")
	ErrExists      = errors.New("file exists")
	ErrNotDir      = errors.New("not a directory")
	ErrIsDir       = errors.New("is a directory")
	ErrNotEmpty    = errors.New("directory not empty")
	ErrInvalid     = errors.New("invalid argument")
	ErrNoSpace     = errors.New("no space left on datanodes")
	ErrPermission  = errors.New("permission denied")
	ErrTxn         = errors.New("transaction not usable")
	ErrUnavailable = errors.New("not enough live datanodes")
	ErrNameTooLong = errors.New("file name too long")
	ErrLoop        = errors.New("too many levels of symbolic links")
	ErrInternal    = errors.New("namenode internal error")
	ErrChecksum    = errors.New("block checksum mismatch")
	// ErrCommitUnknown: the connection to the namenode was lost after the
	// commit was sent; the transaction may or may not have committed.
	// Look at the data to find out; never assume either.
	ErrCommitUnknown = errors.New("commit outcome unknown")
	// ErrConnLost: the transaction was begun on a namenode connection
	// that broke since (the namenode restarted, say), so the namenode has
	// aborted it. It also matches ErrTxn.
	ErrConnLost = errors.New("namenode connection lost")
)

var codeErrors = map[wire.Code]error{
	wire.ErrCodeNotFound:    ErrNotFound,
	wire.ErrCodeExists:      ErrExists,
	wire.ErrCodeNotDir:      ErrNotDir,
	wire.ErrCodeIsDir:       ErrIsDir,
	wire.ErrCodeNotEmpty:    ErrNotEmpty,
	wire.ErrCodeConflict:    ErrConflict,
	wire.ErrCodeInvalid:     ErrInvalid,
	wire.ErrCodeNoSpace:     ErrNoSpace,
	wire.ErrCodePerm:        ErrPermission,
	wire.ErrCodeTxn:         ErrTxn,
	wire.ErrCodeUnavailable: ErrUnavailable,
	wire.ErrCodeNameTooLong: ErrNameTooLong,
	wire.ErrCodeLoop:        ErrLoop,
	wire.ErrCodeInternal:    ErrInternal,
}

// ErrorCode is the namenode's code for an error; compare errors with
// errors.Is and the sentinels rather than with codes.
type ErrorCode uint8

// Error is an error reported by the namenode. Its message names the path or
// inode concerned.
type Error struct {
	Code ErrorCode
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Is matches the sentinel for the error's code and the io/fs equivalents.
func (e *Error) Is(target error) bool {
	s := codeErrors[wire.Code(e.Code)]
	if s == target {
		return true
	}
	switch target {
	case fs.ErrNotExist:
		return s == ErrNotFound
	case fs.ErrExist:
		return s == ErrExists
	case fs.ErrPermission:
		return s == ErrPermission
	}
	return false
}

func respErr(r *wire.Response) error {
	if r.Code == wire.OK {
		return nil
	}
	msg := r.Msg
	if msg == "" {
		msg = codeErrors[r.Code].Error()
	}
	return &Error{Code: ErrorCode(r.Code), Msg: msg}
}
