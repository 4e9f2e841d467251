// Package clientlink hands the client library's machinery to
// internal/clientx without exporting it from package client.
//
// The machinery (inode-addressed calls, compound transactions, leases,
// counters, tuning knobs) is for this module's frontends, not for users of
// the library, so it must not be part of client's API; yet it works on the
// client's unexported state. clientx cannot be imported by client (clientx
// names client's types), so client fills in a Hooks value at init, here,
// in a package that depends on neither, and clientx takes it out with the
// same type arguments. Go's internal rule keeps both away from users.
package clientlink

import (
	"context"

	"github.com/plasmafs/plasma/internal/wire"
)

// Hooks are the client's functions clientx builds on. C, T, F and I are
// the client's *Client, *Txn, *File and FileInfo.
type Hooks[C, T, F, I any] struct {
	// Call sends a request outside any transaction (Client.call).
	Call func(c C, ctx context.Context, q *wire.Request) (*wire.Response, error)
	// TxCall sends a request in a transaction (Txn.call): the first one
	// begins it, an Auto transaction's first one commits it too.
	TxCall func(tx T, ctx context.Context, q *wire.Request) (*wire.Response, error)
	// InfoOf turns the namenode's attributes into a FileInfo.
	InfoOf func(a *wire.Attr) I
	// NewTxn opens a transaction; with auto its first request commits it
	// (async: acknowledged once applied).
	NewTxn func(c C, auto, async bool) T
	// CreateReq fills in the owner of a create request: the transaction's
	// (SetOwner), else the client's.
	CreateReq func(tx T, q *wire.Request) *wire.Request
	// SetOwner makes tx create as user and group.
	SetOwner func(tx T, user, group string)
	// Lost reports whether tx's namenode connection broke or was replaced.
	Lost func(tx T) bool
	// LeaseCall sends a lease request on the current namenode connection,
	// without a transaction or a retry, and returns the connection's
	// generation with the answer.
	LeaseCall func(c C, ctx context.Context, q *wire.Request) (*wire.Response, uint64, error)
	// Generation is the current namenode connection's generation.
	Generation func(c C) uint64
	// Requests counts the requests sent to the namenode.
	Requests func(c C) uint64
	// Addr is the address of the namenode the client is connected to.
	Addr func(c C) string
	// SetFlushBlocks sets how many dirty blocks f buffers before writing.
	SetFlushBlocks func(f F, n int)
	// ReadAtShared reads without copying what lies in f's blocks in
	// memory (File.readAtShared).
	ReadAtShared func(f F, p []byte, off int64) (bufs [][]byte, n int, release func(), err error)
}

var hooks any

// Set is called by package client's init.
func Set[C, T, F, I any](h *Hooks[C, T, F, I]) { hooks = h }

// Get returns what Set was given; the type arguments must be Set's.
func Get[C, T, F, I any]() *Hooks[C, T, F, I] { return hooks.(*Hooks[C, T, F, I]) }
