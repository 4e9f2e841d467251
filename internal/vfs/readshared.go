package vfs

import (
	"context"
	"io"
	"syscall"

	"github.com/plasmafs/plasma/internal/clientx"
)

// ReadShared reads like Read, for a caller that sends the bytes on and
// can do without a copy: it returns them as slices, in file order, partly
// of p and partly of the client's blocks in memory (clientx.ReadAtShared).
// Call release exactly once after the slices were last used; until then
// those blocks are not reused. The FUSE mount answers READ with them,
// writing its reply straight from the blocks.
func (v *VFS) ReadShared(ctx context.Context, fh uint64, p []byte, off int64) (bufs [][]byte, n int, release func(), err error) {
	h, err := v.handle(fh)
	if err != nil {
		return nil, 0, func() {}, err
	}
	st := h.st
	if st == nil {
		return nil, 0, func() {}, syscall.EISDIR
	}
	st.mu.RLock()
	if st.f != nil {
		bufs, n, release, err := clientx.ReadAtShared(st.f, p, off)
		st.mu.RUnlock()
		if err == io.EOF {
			err = nil
		}
		if err == nil && n == len(p) {
			return bufs, n, release, nil
		}
		release()
	} else {
		st.mu.RUnlock()
	}
	// A short read (the file may have grown elsewhere), an error (the
	// transaction may be lost) or no transaction yet: Read knows what to
	// do, into p.
	n, err = st.read(ctx, p, off)
	return [][]byte{p[:n]}, n, func() {}, err
}
