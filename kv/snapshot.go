package kv

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"
	"sync/atomic"
)

// Snapshot is one committed version of a database. It never changes:
// commits made after it was taken are not visible in it, and it never
// blocks or is blocked by a writer. It is safe for concurrent use. Release
// it when done; the PlasmaFS transaction that keeps its blocks readable
// ends when the last user releases it.
type Snapshot struct {
	db   *DB
	src  io.ReaderAt
	file uint64 // cache identity of the file (inode number, or a local file's number)
	size int64
	bs   int64
	tr   trailer
	refs atomic.Int64
	end  func() // ends the transaction (nil for local files)
	// verifiedBlocks: src checks every block it reads against its
	// checksum (a PlasmaFS file), so cached blocks hold verified bytes.
	verifiedBlocks bool
	once           sync.Once
}

type blockKey struct{ file, idx, gen uint64 }

type nodeKey struct {
	file uint64
	off  int64
	gen  uint64
}

// Release gives the snapshot back. It must not be used afterwards.
func (s *Snapshot) Release() {
	if n := s.refs.Add(-1); n == 0 && s.end != nil {
		s.once.Do(s.end)
	} else if n < 0 {
		panic("kv: Snapshot released more often than acquired")
	}
}

func (s *Snapshot) acquire() { s.refs.Add(1) }

// Version is the commit number of the snapshot (1 for a new database);
// every commit adds one.
func (s *Snapshot) Version() uint64 { return s.tr.seq }

// Len is the number of keys.
func (s *Snapshot) Len() int64 { return int64(s.tr.count) }

// MaxKeyLength is the database's key length limit.
func (s *Snapshot) MaxKeyLength() int { return int(s.tr.maxKey) }

// Stats describe a snapshot's file.
type Stats struct {
	Version      uint64
	Keys         int64
	FileSize     int64 // bytes in the database file
	LiveBytes    int64 // bytes this version references (values, index, trailer)
	Garbage      int64 // FileSize - LiveBytes: what vacuum would reclaim
	MaxKeyLength int
	Compactions  uint64 // in-place rewrites of the tail since the file was written
	Blocksize    int    // the file's blocksize (a local file's read unit)
}

// Stats returns figures about the snapshot's file.
func (s *Snapshot) Stats() Stats {
	return Stats{Version: s.tr.seq, Keys: int64(s.tr.count), FileSize: s.size, LiveBytes: s.tr.live,
		Garbage: s.size - s.tr.live, MaxKeyLength: int(s.tr.maxKey), Compactions: s.tr.gen, Blocksize: int(s.bs)}
}

// The part of the file below tr.sealed is never rewritten, so its blocks
// and nodes are cached under generation 0 across snapshots; the tail above
// may be rewritten by a compaction, which bumps tr.gen.
func (s *Snapshot) blockGen(idx uint64) uint64 {
	if int64(idx+1)*s.bs <= s.tr.sealed {
		return 0
	}
	return s.tr.gen + 1
}

func (s *Snapshot) nodeGen(off int64, n uint32) uint64 {
	if off+int64(n) <= s.tr.sealed {
		return 0
	}
	return s.tr.gen + 1
}

// block returns block idx of the file (bs bytes, zero past the end),
// from the cache or read whole.
func (s *Snapshot) block(idx uint64) ([]byte, error) {
	k := blockKey{s.file, idx, s.blockGen(idx)}
	if b, ok := s.db.blocks.get(k); ok {
		return b, nil
	}
	b := make([]byte, s.bs)
	start := int64(idx) * s.bs
	n := min(s.bs, s.size-start)
	if n <= 0 {
		return nil, corruptf("read of block %d past the end", idx)
	}
	if m, err := s.src.ReadAt(b[:n], start); m < int(n) {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return s.db.blocks.put(k, b, s.bs), nil
}

// readAt fills p from the file at off through the block cache.
func (s *Snapshot) readAt(p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > s.size {
		return corruptf("record at %d+%d outside the file (%d bytes)", off, len(p), s.size)
	}
	for len(p) > 0 {
		idx := uint64(off / s.bs)
		b, err := s.block(idx)
		if err != nil {
			return err
		}
		n := copy(p, b[off%s.bs:])
		p = p[n:]
		off += int64(n)
	}
	return nil
}

// node returns the decoded node at off (n bytes).
func (s *Snapshot) node(off int64, n uint32) (*node, error) {
	k := nodeKey{s.file, off, s.nodeGen(off, n)}
	if nd, ok := s.db.nodes.get(k); ok {
		return nd, nil
	}
	b := make([]byte, n)
	if err := s.readAt(b, off); err != nil {
		return nil, err
	}
	nd, err := decodeNode(b, off)
	if err != nil {
		return nil, err
	}
	return s.db.nodes.put(k, nd, int64(n)*2+int64(nd.len())*48), nil
}

func (s *Snapshot) root() (child, bool) {
	if s.tr.rootLen == 0 {
		return child{}, false
	}
	return child{off: s.tr.rootOff, n: s.tr.rootLen, count: s.tr.count}, true
}

// lookup finds key's value.
func (s *Snapshot) lookup(key []byte) (vref, bool, error) {
	c, ok := s.root()
	if !ok {
		return vref{}, false, nil
	}
	for {
		nd, err := s.node(c.off, c.n)
		if err != nil {
			return vref{}, false, err
		}
		if nd.leaf {
			i := sort.Search(len(nd.entries), func(i int) bool { return bytes.Compare(nd.entries[i].key, key) >= 0 })
			if i < len(nd.entries) && bytes.Equal(nd.entries[i].key, key) {
				return nd.entries[i].v, true, nil
			}
			return vref{}, false, nil
		}
		i := sort.Search(len(nd.kids), func(i int) bool { return bytes.Compare(nd.kids[i].key, key) > 0 }) - 1
		if i < 0 {
			return vref{}, false, nil
		}
		c = nd.kids[i]
	}
}

// rank is the number of keys less than key (nil: all keys).
func (s *Snapshot) rank(key []byte) (uint64, error) {
	if key == nil {
		return s.tr.count, nil
	}
	c, ok := s.root()
	if !ok {
		return 0, nil
	}
	var r uint64
	for {
		nd, err := s.node(c.off, c.n)
		if err != nil {
			return 0, err
		}
		if nd.leaf {
			return r + uint64(sort.Search(len(nd.entries), func(i int) bool { return bytes.Compare(nd.entries[i].key, key) >= 0 })), nil
		}
		i := sort.Search(len(nd.kids), func(i int) bool { return bytes.Compare(nd.kids[i].key, key) >= 0 }) - 1
		if i < 0 {
			return r, nil
		}
		for _, k := range nd.kids[:i] {
			r += k.count
		}
		c = nd.kids[i]
	}
}

// Get returns the value of key, or an error matching ErrNotFound.
func (s *Snapshot) Get(key []byte) ([]byte, error) {
	v, ok, err := s.lookup(key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	return s.value(v)
}

// value reads a whole value and checks its checksum.
func (s *Snapshot) value(v vref) ([]byte, error) {
	if !v.ext {
		return bytes.Clone(v.inline), nil
	}
	b := make([]byte, v.n)
	if v.n <= s.cachedValueMax() {
		if err := s.readAt(b, v.off); err != nil {
			return nil, err
		}
	} else if err := s.readDirect(b, v.off); err != nil {
		return nil, err
	}
	if crc32.Checksum(b, castagnoli) != v.crc {
		return nil, corruptf("value at %d: checksum mismatch", v.off)
	}
	return b, nil
}

// cachedValueMax: values up to this size are read through the block
// cache; larger ones are streamed past it.
func (s *Snapshot) cachedValueMax() int64 { return max(4*s.bs, 256<<10) }

func (s *Snapshot) readDirect(p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > s.size {
		return corruptf("record at %d+%d outside the file (%d bytes)", off, len(p), s.size)
	}
	n, err := s.src.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// Lookup opens key's value for streaming, or returns an error matching
// ErrNotFound. The Value holds the snapshot until it is closed.
func (s *Snapshot) Lookup(key []byte) (*Value, error) {
	v, ok, err := s.lookup(key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	s.acquire()
	return &Value{s: s, v: v}, nil
}

// Has reports whether key exists.
func (s *Snapshot) Has(key []byte) (bool, error) {
	_, ok, err := s.lookup(key)
	return ok, err
}

// Range selects keys for Scan and Count. The zero Range selects all.
type Range struct {
	Prefix []byte // only keys starting with Prefix
	From   []byte // only keys >= From (nil: no lower bound)
	To     []byte // only keys <= To (nil: no upper bound)
}

// bounds turns r into [lo, hi) (hi nil: unbounded); empty says no key
// can match.
func (r Range) bounds() (lo, hi []byte, empty bool) {
	lo = r.From
	if r.Prefix != nil && bytes.Compare(r.Prefix, lo) > 0 {
		lo = r.Prefix
	}
	if r.To != nil {
		hi = append(bytes.Clone(r.To), 0) // the key right after To
	}
	if r.Prefix != nil {
		if pe := prefixEnd(r.Prefix); pe != nil && (hi == nil || bytes.Compare(pe, hi) < 0) {
			hi = pe
		}
	}
	if lo == nil {
		lo = []byte{}
	}
	return lo, hi, hi != nil && bytes.Compare(lo, hi) >= 0
}

// prefixEnd is the smallest key greater than every key with prefix p
// (nil if there is none: p is all 0xff).
func prefixEnd(p []byte) []byte {
	e := bytes.Clone(p)
	for i := len(e) - 1; i >= 0; i-- {
		if e[i] != 0xff {
			e[i]++
			return e[:i+1]
		}
	}
	return nil
}

// Count returns how many keys r selects, reading only the nodes on two
// paths from the root (branch entries carry their subtree's key count).
func (s *Snapshot) Count(r Range) (int64, error) {
	lo, hi, empty := r.bounds()
	if empty {
		return 0, nil
	}
	a, err := s.rank(lo)
	if err != nil {
		return 0, err
	}
	b, err := s.rank(hi)
	if err != nil {
		return 0, err
	}
	return int64(b - a), nil
}

// Scan iterates over the keys r selects, in lexicographic (byte) order.
// The Iterator holds the snapshot until it is closed.
func (s *Snapshot) Scan(r Range) *Iterator {
	s.acquire()
	it := &Iterator{s: s}
	lo, hi, empty := r.bounds()
	if empty {
		return it
	}
	it.hi = hi
	c, ok := s.root()
	for ok {
		nd, err := s.node(c.off, c.n)
		if err != nil {
			it.err = err
			break
		}
		if nd.leaf {
			i := sort.Search(len(nd.entries), func(i int) bool { return bytes.Compare(nd.entries[i].key, lo) >= 0 })
			it.stack = append(it.stack, frame{nd, i})
			break
		}
		i := max(sort.Search(len(nd.kids), func(i int) bool { return bytes.Compare(nd.kids[i].key, lo) > 0 })-1, 0)
		it.stack = append(it.stack, frame{nd, i + 1})
		c = nd.kids[i]
	}
	return it
}

type frame struct {
	nd *node
	i  int // leaf: next entry; branch: next child
}

// Iterator walks keys in order. Call Next before each key; Key and the
// value methods refer to the current key.
type Iterator struct {
	s      *Snapshot
	stack  []frame
	hi     []byte
	cur    entry
	err    error
	closed bool
}

// Next moves to the next key; it returns false at the end or on error
// (see Err).
func (it *Iterator) Next() bool {
	if it.err != nil || it.closed {
		return false
	}
	for len(it.stack) > 0 {
		top := &it.stack[len(it.stack)-1]
		if top.nd.leaf {
			if top.i < len(top.nd.entries) {
				e := top.nd.entries[top.i]
				top.i++
				if it.hi != nil && bytes.Compare(e.key, it.hi) >= 0 {
					it.stack = nil
					return false
				}
				it.cur = e
				return true
			}
		} else if top.i < len(top.nd.kids) {
			c := top.nd.kids[top.i]
			top.i++
			nd, err := it.s.node(c.off, c.n)
			if err != nil {
				it.err = err
				return false
			}
			it.stack = append(it.stack, frame{nd, 0})
			continue
		}
		it.stack = it.stack[:len(it.stack)-1]
	}
	return false
}

// Key returns the current key. The slice must not be changed.
func (it *Iterator) Key() []byte { return it.cur.key }

// Size returns the current value's size.
func (it *Iterator) Size() int64 { return it.cur.v.size() }

// Value reads the current value whole.
func (it *Iterator) Value() ([]byte, error) { return it.s.value(it.cur.v) }

// Open opens the current value for streaming (close it when done).
func (it *Iterator) Open() *Value {
	it.s.acquire()
	return &Value{s: it.s, v: it.cur.v}
}

// Err returns the error that ended the iteration, if any.
func (it *Iterator) Err() error { return it.err }

// Close releases the iterator's snapshot.
func (it *Iterator) Close() error {
	if !it.closed {
		it.closed = true
		it.s.Release()
	}
	return nil
}

// Value is a value opened for reading from a snapshot: io.Reader,
// io.ReaderAt, io.WriterTo and io.Seeker. Large values are streamed
// block by block and never held whole in memory. Reading it from start to
// end checks its CRC32C (a mismatch is an error matching ErrCorrupt).
// Close it to release the snapshot.
type Value struct {
	s      *Snapshot
	v      vref
	pos    int64
	crc    uint32 // of bytes 0..crcPos, read in order
	crcPos int64
	closed bool
}

// Size returns the value's length in bytes.
func (v *Value) Size() int64 { return v.v.size() }

// Close releases the value's snapshot.
func (v *Value) Close() error {
	if !v.closed {
		v.closed = true
		v.s.Release()
	}
	return nil
}

// ReadAt implements io.ReaderAt.
func (v *Value) ReadAt(p []byte, off int64) (int, error) {
	if v.closed {
		return 0, ErrClosed
	}
	size := v.Size()
	if off < 0 {
		return 0, errors.New("kv: negative offset")
	}
	if off >= size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), size-off))
	if !v.v.ext {
		copy(p, v.v.inline[off:])
	} else if size <= v.s.cachedValueMax() {
		if err := v.s.readAt(p[:n], v.v.off+off); err != nil {
			return 0, err
		}
	} else if err := v.s.readDirect(p[:n], v.v.off+off); err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Read implements io.Reader.
func (v *Value) Read(p []byte) (int, error) {
	n, err := v.ReadAt(p, v.pos)
	v.account(p[:n])
	if err == io.EOF && n > 0 {
		err = nil
	}
	if err == nil || err == io.EOF {
		if cerr := v.checkEnd(); cerr != nil {
			return n, cerr
		}
	}
	return n, err
}

// account adds bytes read at v.pos to the running checksum.
func (v *Value) account(p []byte) {
	if v.pos == v.crcPos {
		v.crc = crc32.Update(v.crc, castagnoli, p)
		v.crcPos += int64(len(p))
	}
	v.pos += int64(len(p))
}

func (v *Value) checkEnd() error {
	if v.v.ext && v.crcPos == v.v.n && v.pos == v.crcPos && v.crc != v.v.crc {
		v.crcPos = -1 // report once
		return corruptf("value at %d: checksum mismatch", v.v.off)
	}
	return nil
}

// Seek implements io.Seeker.
func (v *Value) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += v.pos
	case io.SeekEnd:
		offset += v.Size()
	default:
		return 0, errors.New("kv: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("kv: negative position")
	}
	v.pos = offset
	return offset, nil
}

// streamDepth is how many blocks of a large value are fetched ahead.
const streamDepth = 4

// WriteTo implements io.WriterTo: it writes the value from the current
// position to w, fetching the blocks of a large value streamDepth at a
// time in parallel.
func (v *Value) WriteTo(w io.Writer) (int64, error) {
	if v.closed {
		return 0, ErrClosed
	}
	size := v.Size()
	if v.pos >= size {
		return 0, v.checkEnd()
	}
	if !v.v.ext || size <= v.s.cachedValueMax() {
		buf := make([]byte, size-v.pos)
		n, err := v.ReadAt(buf, v.pos)
		if err != nil && err != io.EOF {
			return 0, err
		}
		v.account(buf[:n])
		if err := v.checkEnd(); err != nil {
			return 0, err
		}
		m, err := w.Write(buf[:n])
		return int64(m), err
	}
	return v.stream(w)
}

// stream copies a large value from v.pos to w, whole blocks at a time.
func (v *Value) stream(w io.Writer) (int64, error) {
	s := v.s
	start := v.v.off + v.pos
	end := v.v.off + v.v.n
	first := start / s.bs
	last := (end - 1) / s.bs
	type slot struct {
		buf  []byte
		err  error
		done chan struct{}
	}
	slots := make([]*slot, streamDepth)
	for i := range slots {
		slots[i] = &slot{buf: make([]byte, s.bs)}
	}
	fetch := func(idx int64) {
		sl := slots[idx%streamDepth]
		sl.done = make(chan struct{})
		lo := idx * s.bs
		hi := min(lo+s.bs, s.size)
		go func() {
			defer close(sl.done)
			sl.err = s.readDirect(sl.buf[:hi-lo], lo)
		}()
	}
	next := first
	for ; next <= last && next < first+streamDepth; next++ {
		fetch(next)
	}
	var written int64
	var err error
	for idx := first; idx <= last; idx++ {
		sl := slots[idx%streamDepth]
		<-sl.done
		if err = sl.err; err != nil {
			break
		}
		lo, hi := int64(0), s.bs
		if idx == first {
			lo = start - idx*s.bs
		}
		if idx == last {
			hi = end - idx*s.bs
		}
		chunk := sl.buf[lo:hi]
		v.account(chunk)
		if idx == last {
			if err = v.checkEnd(); err != nil {
				break
			}
		}
		n, werr := w.Write(chunk)
		written += int64(n)
		if werr != nil {
			err = werr
			break
		}
		if next <= last {
			fetch(next)
			next++
		}
	}
	for _, sl := range slots {
		if sl.done != nil {
			<-sl.done
		}
	}
	if err != nil {
		return written, fmt.Errorf("kv: value at %d: %w", v.v.off, err)
	}
	return written, nil
}
