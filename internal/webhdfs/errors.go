package webhdfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/plasmafs/plasma/client"
)

// remoteError is an error as Hadoop's RemoteException JSON body carries
// it: Hadoop clients rebuild the Java exception from javaClassName, and
// Python clients choose their exception by its simple name.
type remoteError struct {
	status    int
	exception string // simple name (RemoteException.exception)
	javaClass string
	msg       string
	cause     error // what errors.Is matches (a client sentinel), if any
}

func (e *remoteError) Error() string { return e.exception + ": " + e.msg }

func (e *remoteError) Unwrap() error { return e.cause }

// The exceptions the gateway answers, with the HTTP statuses Hadoop's
// namenode gives them (its ExceptionHandler: IOExceptions are 403).
var (
	excNotFound     = exception{http.StatusNotFound, "FileNotFoundException", "java.io.FileNotFoundException"}
	excAccess       = exception{http.StatusForbidden, "AccessControlException", "org.apache.hadoop.security.AccessControlException"}
	excExists       = exception{http.StatusForbidden, "FileAlreadyExistsException", "org.apache.hadoop.fs.FileAlreadyExistsException"}
	excNotEmpty     = exception{http.StatusForbidden, "PathIsNotEmptyDirectoryException", "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException"}
	excParentNotDir = exception{http.StatusForbidden, "ParentNotDirectoryException", "org.apache.hadoop.fs.ParentNotDirectoryException"}
	excEOF          = exception{http.StatusForbidden, "EOFException", "java.io.EOFException"}
	excIO           = exception{http.StatusForbidden, "IOException", "java.io.IOException"}
	excInternal     = exception{http.StatusInternalServerError, "IOException", "java.io.IOException"}
	excArgument     = exception{http.StatusBadRequest, "IllegalArgumentException", "java.lang.IllegalArgumentException"}
	excUnsupported  = exception{http.StatusBadRequest, "UnsupportedOperationException", "java.lang.UnsupportedOperationException"}
	excSecurity     = exception{http.StatusUnauthorized, "SecurityException", "java.lang.SecurityException"}
	excTooLarge     = exception{http.StatusRequestEntityTooLarge, "IOException", "java.io.IOException"}
)

type exception struct {
	status          int
	name, javaClass string
}

// errorf makes an error answered as exception e.
func (e exception) errorf(format string, args ...any) error {
	return &remoteError{status: e.status, exception: e.name, javaClass: e.javaClass, msg: fmt.Sprintf(format, args...)}
}

// missingf is FileNotFoundException matching client.ErrNotFound.
func missingf(format string, args ...any) error {
	e := excNotFound.errorf(format, args...).(*remoteError)
	e.cause = client.ErrNotFound
	return e
}

// remoteOf maps an error of the client library (or the gateway's own) to
// the exception Hadoop would answer for it. Messages of the namenode name
// the path or inode concerned.
func remoteOf(err error) *remoteError {
	var re *remoteError
	if errors.As(err, &re) {
		return re
	}
	e := excInternal
	switch {
	case errors.Is(err, client.ErrNotFound):
		e = excNotFound
	case errors.Is(err, client.ErrPermission):
		e = excAccess
	case errors.Is(err, client.ErrExists):
		e = excExists
	case errors.Is(err, client.ErrNotEmpty):
		e = excNotEmpty
	case errors.Is(err, client.ErrNotDir):
		e = excParentNotDir
	case errors.Is(err, client.ErrInvalid), errors.Is(err, client.ErrNameTooLong), errors.Is(err, client.ErrLoop):
		e = excArgument
	case errors.Is(err, client.ErrIsDir), errors.Is(err, client.ErrNoSpace), errors.Is(err, client.ErrUnavailable),
		errors.Is(err, client.ErrConflict), errors.Is(err, client.ErrChecksum), errors.Is(err, context.Canceled):
		e = excIO
	}
	return &remoteError{status: e.status, exception: e.name, javaClass: e.javaClass, msg: err.Error()}
}

// writeError answers err as a RemoteException body.
func writeError(w http.ResponseWriter, err error) {
	re := remoteOf(err)
	body := map[string]any{"RemoteException": map[string]string{
		"exception": re.exception, "javaClassName": re.javaClass, "message": re.msg}}
	writeJSON(w, re.status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only plain maps and structs are answered
		status, b = http.StatusInternalServerError, []byte(`{"RemoteException":{"exception":"IOException","javaClassName":"java.io.IOException","message":"encoding the answer failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeBool(w http.ResponseWriter, b bool) {
	writeJSON(w, http.StatusOK, map[string]bool{"boolean": b})
}

type contentSummary struct {
	DirectoryCount int64 `json:"directoryCount"`
	FileCount      int64 `json:"fileCount"`
	Length         int64 `json:"length"`
	Quota          int64 `json:"quota"`
	SpaceConsumed  int64 `json:"spaceConsumed"`
	SpaceQuota     int64 `json:"spaceQuota"`
}
