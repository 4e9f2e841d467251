package namenode

import (
	"errors"
	"fmt"

	"github.com/plasmafs/plasma/internal/wire"
)

// opError carries the wire code a failed operation reports to the client.
type opError struct {
	code wire.Code
	msg  string
}

func (e *opError) Error() string { return e.msg }

func fail(code wire.Code, format string, args ...any) error {
	return &opError{code: code, msg: fmt.Sprintf(format, args...)}
}

var (
	errConflict = &opError{wire.ErrCodeConflict, "conflict with another transaction"}
	errNotFound = &opError{wire.ErrCodeNotFound, "not found"}
)

// toResponse encodes err as a response.
func toResponse(err error) *wire.Response {
	var oe *opError
	if errors.As(err, &oe) {
		return &wire.Response{Code: oe.code, Msg: oe.msg}
	}
	return &wire.Response{Code: wire.ErrCodeInternal, Msg: err.Error()}
}
