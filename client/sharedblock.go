package client

import "sync/atomic"

// sharedBlock is a pooled block buffer that several holders use at once:
// the reader's cache slot, a read-ahead entry, the goroutine filling it,
// each ReadAt copying from it without the file's lock and each view of
// it handed out by ReadAtShared (the FUSE mount writes its reply straight
// from the block). The buffer goes back to the block pool only when the
// last holder lets go; returning it earlier would let a later read
// overwrite bytes a reply has not yet sent: a wrong read, not a crash.
type sharedBlock struct {
	buf  []byte
	refs atomic.Int32
}

// newSharedBlock wraps a pooled buffer with holders references.
func newSharedBlock(buf []byte, holders int32) *sharedBlock {
	b := &sharedBlock{buf: buf}
	b.refs.Store(holders)
	return b
}

// acquire adds a holder. The caller must be a holder already or hold the
// file's lock while the block is reachable from the reader (cache slot,
// read-ahead map), whose reference keeps it alive meanwhile.
func (b *sharedBlock) acquire() { b.refs.Add(1) }

// release drops a holder; the last one returns the buffer to the pool.
func (b *sharedBlock) release() {
	if b.refs.Add(-1) == 0 {
		putBlockBuf(b.buf)
	}
}
