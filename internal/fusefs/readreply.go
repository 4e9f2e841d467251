package fusefs

import "github.com/hanwen/go-fuse/v2/fuse"

// sharedReply is a READ reply written straight from the client's blocks
// in memory (vfs.ReadShared), without first copying them into go-fuse's
// buffer: on a sequential read that copy was about a sixth of the mount's
// CPU. go-fuse writes a result that has Slices with one writev and calls
// Done after it (fuseFD.write), and only then may the blocks be reused:
// Done lets go of them.
type sharedReply struct {
	bufs    [][]byte
	size    int
	release func()
}

// Slices gives go-fuse the bytes to write, in order, without a copy.
func (r *sharedReply) Slices() ([][]byte, fuse.Status) { return r.bufs, fuse.OK }

// Size is the length of the reply's data.
func (r *sharedReply) Size() int { return r.size }

// Bytes copies the data into buf, for a go-fuse path that writes the
// bytes after Done (which would let the blocks be reused before).
func (r *sharedReply) Bytes(buf []byte) ([]byte, fuse.Status) {
	if cap(buf) < r.size {
		buf = make([]byte, r.size)
	}
	buf = buf[:0]
	for _, b := range r.bufs {
		buf = append(buf, b...)
	}
	return buf, fuse.OK
}

// Done lets go of the blocks once the reply is written.
func (r *sharedReply) Done() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
}
