package meta

import (
	"encoding/binary"
	"fmt"
)

// encoder and decoder are the commit log's primitive encodings (see
// logcodec.go). They are the store's own, like its types: the protocol's
// may change without changing what a logged record means.

type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) i64(v int64)  { e.b = binary.LittleEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) uv(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) str(s string) { e.uv(uint64(len(s))); e.b = append(e.b, s...) }

func (e *encoder) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// decoder reads what encoder wrote. The first error sticks; later reads
// return zero values, so a record is decoded whole and checked once.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.fail("record ends inside %s", what)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if b := d.take(1, "a byte"); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if b := d.take(4, "a u32"); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) i64() int64 {
	if b := d.take(8, "an i64"); b != nil {
		return int64(binary.LittleEndian.Uint64(b))
	}
	return 0
}

func (d *decoder) uv() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bool() bool { return d.u8() != 0 }

// count reads a list's length; each element takes at least minBytes, so a
// length the record cannot hold is an error, not an allocation.
func (d *decoder) count(minBytes int) int {
	v := d.uv()
	if d.err != nil {
		return 0
	}
	if v > uint64(len(d.b)/minBytes) {
		d.fail("list of %d elements in %d bytes", v, len(d.b))
		return 0
	}
	return int(v)
}

func (d *decoder) bytes() []byte {
	n := d.count(1)
	return d.take(n, "a string")
}

func (d *decoder) str() string { return string(d.bytes()) }
