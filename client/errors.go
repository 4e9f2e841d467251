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
	// ReqID is the id of the request in the namenode's log (0: unknown).
	ReqID uint64
}

// Error is the namenode's message; for an error the namenode logs (a
// refused access, an internal error), followed by the request id, which
// finds the namenode's (and datanodes') log lines about it.
func (e *Error) Error() string {
	if e.ReqID == 0 || !wire.Code(e.Code).Logged() {
		return e.Msg
	}
	return e.Msg + " (request " + wire.FormatReqID(e.ReqID) + ")"
}

// withReqID records the request id of q in err, an error of the namenode's
// answer to q.
func withReqID(err error, id uint64) error {
	if e, ok := err.(*Error); ok {
		e.ReqID = id
	}
	return err
}

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
