package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The database file (DIR/kv) is a sequence of commits. A commit appends
// its new values, then the B+-tree nodes it changed (children before
// parents, so every reference points backwards), then a fixed-size
// trailer; the file ends with the trailer of the newest commit. A reader
// therefore needs nothing but the file's size and the last trailerSize
// bytes to find the root of the version it opened, and PlasmaFS hands a
// transaction one committed version of a file (size and block list
// together), so a reader never sees a mixed state.
//
// Where a commit starts is the writer's choice (see writer.go): usually at
// the next block boundary after the previous end, so the previous commit's
// partial last block is never read back and rewritten (copy-on-write
// blocks would make that cost a whole block per commit); every
// TailCommits commits, or when a commit is large, at the sealed offset,
// pulling the live data of the small commits since (the tail) along and
// rewriting the one block that straddles the sealed offset.

const (
	trailerSize   = 96
	formatVersion = 1
	// inlineMax: values up to this size live in the leaf itself.
	inlineMax = 64
	// DefaultMaxKeyLength is the key length limit of a database created
	// without one.
	DefaultMaxKeyLength = 256
	// MaxKeyLengthLimit is the largest key length limit a database can
	// have.
	MaxKeyLengthLimit = 65536
	// nodeTargetMin is the usual encoded size of a tree node.
	nodeTargetMin = 4096

	kindLeaf   = 1
	kindBranch = 2
)

var (
	trailerMagic = [4]byte{'P', 'K', 'V', '1'}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

// Errors. Match them with errors.Is.
var (
	// ErrNotFound: no such key.
	ErrNotFound = errors.New("kv: key not found")
	// ErrLocked: another writer (or a vacuum) holds the database; it
	// also matches client.ErrConflict.
	ErrLocked = errors.New("kv: database is locked by another writer")
	// ErrKeyTooLong: the key exceeds the database's key length limit.
	ErrKeyTooLong = errors.New("kv: key too long")
	// ErrCorrupt: the database file does not have the expected format, or
	// a record's checksum does not match.
	ErrCorrupt = errors.New("kv: corrupt database")
	// ErrClosed: the database, snapshot, value or writer was closed.
	ErrClosed = errors.New("kv: closed")
)

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// trailer ends every commit.
type trailer struct {
	seq     uint64 // commit number; 1 is the empty database of create
	rootOff int64  // root node; rootLen 0: empty tree
	rootLen uint32
	maxKey  uint32
	count   uint64 // keys
	sealed  int64  // bytes below this offset are never rewritten in place
	gen     uint64 // times the tail was compacted (rewritten in place)
	live    int64  // bytes referenced by this version (nodes, values, trailer)
	tail    uint32 // commits appended since the last compaction
}

func (t *trailer) encode() []byte {
	b := make([]byte, trailerSize)
	copy(b, trailerMagic[:])
	le := binary.LittleEndian
	le.PutUint32(b[4:], formatVersion)
	le.PutUint64(b[8:], t.seq)
	le.PutUint64(b[16:], uint64(t.rootOff))
	le.PutUint32(b[24:], t.rootLen)
	le.PutUint32(b[28:], t.maxKey)
	le.PutUint64(b[32:], t.count)
	le.PutUint64(b[40:], uint64(t.sealed))
	le.PutUint64(b[48:], t.gen)
	le.PutUint64(b[56:], uint64(t.live))
	le.PutUint32(b[64:], t.tail)
	le.PutUint32(b[trailerSize-4:], crc32.Checksum(b[:trailerSize-4], castagnoli))
	return b
}

// decodeTrailer checks and decodes the trailer of a file of size bytes.
func decodeTrailer(b []byte, size int64) (trailer, error) {
	var t trailer
	if len(b) != trailerSize || [4]byte(b[:4]) != trailerMagic {
		return t, corruptf("no Plasma KV trailer at the end of the file")
	}
	le := binary.LittleEndian
	if crc32.Checksum(b[:trailerSize-4], castagnoli) != le.Uint32(b[trailerSize-4:]) {
		return t, corruptf("trailer checksum mismatch")
	}
	if v := le.Uint32(b[4:]); v != formatVersion {
		return t, corruptf("format version %d (this program reads %d)", v, formatVersion)
	}
	t.seq = le.Uint64(b[8:])
	t.rootOff = int64(le.Uint64(b[16:]))
	t.rootLen = le.Uint32(b[24:])
	t.maxKey = le.Uint32(b[28:])
	t.count = le.Uint64(b[32:])
	t.sealed = int64(le.Uint64(b[40:]))
	t.gen = le.Uint64(b[48:])
	t.live = int64(le.Uint64(b[56:]))
	t.tail = le.Uint32(b[64:])
	end := size - trailerSize
	if t.rootOff < 0 || t.rootOff+int64(t.rootLen) > end || t.sealed < 0 || t.sealed > end ||
		t.maxKey == 0 || t.maxKey > MaxKeyLengthLimit {
		return t, corruptf("trailer fields out of range")
	}
	return t, nil
}

// vref is a value: inline bytes, or a record in the file.
type vref struct {
	ext    bool
	inline []byte // !ext
	off    int64  // ext
	n      int64  // ext: length
	crc    uint32 // ext: CRC32C of the value
}

func (v vref) size() int64 {
	if v.ext {
		return v.n
	}
	return int64(len(v.inline))
}

// entry is a leaf entry.
type entry struct {
	key []byte
	v   vref
}

// child is a branch entry: the subtree's smallest key, its node and how
// many keys it holds.
type child struct {
	key   []byte
	off   int64
	n     uint32
	count uint64
}

// node is a decoded tree node. Nodes are immutable once decoded (they are
// shared through the cache).
type node struct {
	leaf    bool
	entries []entry // leaf
	kids    []child // branch
	size    int     // encoded size
}

func (n *node) len() int {
	if n.leaf {
		return len(n.entries)
	}
	return len(n.kids)
}

const nodeHeader = 1 + binary.MaxVarintLen64 // kind and entry count (at most)
const nodeCRC = 4

func uvlen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func leafEntrySize(e *entry) int {
	n := uvlen(uint64(len(e.key))) + len(e.key) + 1
	if e.v.ext {
		return n + uvlen(uint64(e.v.off)) + uvlen(uint64(e.v.n)) + 4
	}
	return n + uvlen(uint64(len(e.v.inline))) + len(e.v.inline)
}

func childSize(c *child) int {
	return uvlen(uint64(len(c.key))) + len(c.key) + uvlen(uint64(c.off)) + uvlen(uint64(c.n)) + uvlen(c.count)
}

// nodeTarget is the encoded size nodes are packed to: large enough for at
// least three entries of the longest key.
func nodeTarget(maxKey uint32) int {
	return max(nodeTargetMin, 3*(int(maxKey)+inlineMax+48))
}

func encodeLeaf(es []entry) []byte {
	size := nodeHeader + nodeCRC
	for i := range es {
		size += leafEntrySize(&es[i])
	}
	b := make([]byte, 0, size)
	b = append(b, kindLeaf)
	b = binary.AppendUvarint(b, uint64(len(es)))
	for _, e := range es {
		b = binary.AppendUvarint(b, uint64(len(e.key)))
		b = append(b, e.key...)
		if e.v.ext {
			b = append(b, 1)
			b = binary.AppendUvarint(b, uint64(e.v.off))
			b = binary.AppendUvarint(b, uint64(e.v.n))
			b = binary.LittleEndian.AppendUint32(b, e.v.crc)
		} else {
			b = append(b, 0)
			b = binary.AppendUvarint(b, uint64(len(e.v.inline)))
			b = append(b, e.v.inline...)
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func encodeBranch(cs []child) []byte {
	size := nodeHeader + nodeCRC
	for i := range cs {
		size += childSize(&cs[i])
	}
	b := make([]byte, 0, size)
	b = append(b, kindBranch)
	b = binary.AppendUvarint(b, uint64(len(cs)))
	for _, c := range cs {
		b = binary.AppendUvarint(b, uint64(len(c.key)))
		b = append(b, c.key...)
		b = binary.AppendUvarint(b, uint64(c.off))
		b = binary.AppendUvarint(b, uint64(c.n))
		b = binary.AppendUvarint(b, c.count)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decoder reads fields, remembering the first error.
type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) uvarint() uint64 {
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *decoder) bytes(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.err = true
		d.b = nil
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) byte1() byte {
	if len(d.b) == 0 {
		d.err = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// decodeNode decodes a node record (the slices in it point into b, which
// the caller must not change afterwards). off names it in errors.
func decodeNode(b []byte, off int64) (*node, error) {
	if len(b) < 2+nodeCRC {
		return nil, corruptf("node at %d: %d bytes", off, len(b))
	}
	body := b[:len(b)-nodeCRC]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(body):]) {
		return nil, corruptf("node at %d: checksum mismatch", off)
	}
	d := decoder{b: body}
	kind := d.byte1()
	cnt := d.uvarint()
	if cnt == 0 || cnt > uint64(len(body)) {
		return nil, corruptf("node at %d: %d entries", off, cnt)
	}
	n := &node{size: len(b)}
	switch kind {
	case kindLeaf:
		n.leaf = true
		n.entries = make([]entry, cnt)
		for i := range n.entries {
			e := &n.entries[i]
			e.key = d.bytes(d.uvarint())
			switch d.byte1() {
			case 0:
				e.v.inline = d.bytes(d.uvarint())
			case 1:
				e.v.ext = true
				e.v.off = int64(d.uvarint())
				e.v.n = int64(d.uvarint())
				c := d.bytes(4)
				if len(c) == 4 {
					e.v.crc = binary.LittleEndian.Uint32(c)
				}
				if e.v.off < 0 || e.v.n < 0 {
					d.err = true
				}
			default:
				d.err = true
			}
			if d.err {
				break
			}
		}
	case kindBranch:
		n.kids = make([]child, cnt)
		for i := range n.kids {
			c := &n.kids[i]
			c.key = d.bytes(d.uvarint())
			c.off = int64(d.uvarint())
			ln := d.uvarint()
			c.count = d.uvarint()
			if ln == 0 || ln > 1<<31 || c.off < 0 || c.off >= off {
				d.err = true // children are written before their parents
			}
			c.n = uint32(ln)
			if d.err {
				break
			}
		}
	default:
		return nil, corruptf("node at %d: kind %d", off, kind)
	}
	if d.err || len(d.b) != 0 {
		return nil, corruptf("node at %d: malformed", off)
	}
	return n, nil
}
