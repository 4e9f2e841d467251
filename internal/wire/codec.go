package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrMalformed is returned for any frame or message that cannot be decoded.
var ErrMalformed = errors.New("malformed message")

// Limits on peer-supplied sizes. They bound every allocation a decoder makes.
const (
	MaxFrame   = 16 << 20 // namenode RPC frame
	MaxName    = 255      // one path component
	MaxPath    = 4096     // a whole path
	MaxList    = 1 << 20  // elements of any list in a message
	MaxBytes   = 1 << 20  // an opaque byte field in a control message
	MaxReplica = 16       // replicas of one block
	MaxTicket  = 256      // one datanode ticket
)

// Enc appends a compact binary encoding to a byte slice.
type Enc struct{ B []byte }

func (e *Enc) U8(v uint8)   { e.B = append(e.B, v) }
func (e *Enc) U32(v uint32) { e.B = binary.LittleEndian.AppendUint32(e.B, v) }
func (e *Enc) U64(v uint64) { e.B = binary.LittleEndian.AppendUint64(e.B, v) }
func (e *Enc) I64(v int64)  { e.U64(uint64(v)) }
func (e *Enc) Uv(v uint64)  { e.B = binary.AppendUvarint(e.B, v) }
func (e *Enc) Bool(v bool) {
	if v {
		e.U8(1)
	} else {
		e.U8(0)
	}
}
func (e *Enc) Str(s string) { e.Uv(uint64(len(s))); e.B = append(e.B, s...) }
func (e *Enc) Bytes(b []byte) {
	e.Uv(uint64(len(b)))
	e.B = append(e.B, b...)
}

// Dec reads what Enc wrote. The first error sticks; later reads return zero
// values, so a decoder can read a whole message and check Err once.
type Dec struct {
	B   []byte
	Err error
}

func (d *Dec) fail(what string) {
	if d.Err == nil {
		d.Err = fmt.Errorf("%w: %s", ErrMalformed, what)
	}
}

func (d *Dec) need(n int, what string) bool {
	if d.Err != nil {
		return false
	}
	if n < 0 || len(d.B) < n {
		d.fail("short " + what)
		return false
	}
	return true
}

func (d *Dec) U8() uint8 {
	if !d.need(1, "u8") {
		return 0
	}
	v := d.B[0]
	d.B = d.B[1:]
	return v
}

func (d *Dec) U32() uint32 {
	if !d.need(4, "u32") {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.B)
	d.B = d.B[4:]
	return v
}

func (d *Dec) U64() uint64 {
	if !d.need(8, "u64") {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.B)
	d.B = d.B[8:]
	return v
}

func (d *Dec) I64() int64 { return int64(d.U64()) }

func (d *Dec) Uv() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.B = d.B[n:]
	return v
}

func (d *Dec) Bool() bool {
	switch d.U8() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bool")
	return false
}

// Len reads a list or byte length and checks it against max and against the
// bytes actually left (each element takes at least minElem bytes).
func (d *Dec) Len(max int, minElem int) int {
	v := d.Uv()
	if d.Err != nil {
		return 0
	}
	if v > uint64(max) || v > math.MaxInt32 {
		d.fail("length over limit")
		return 0
	}
	n := int(v)
	if minElem > 0 && n*minElem > len(d.B) {
		d.fail("length beyond message")
		return 0
	}
	return n
}

func (d *Dec) Str(max int) string {
	n := d.Len(max, 1)
	if !d.need(n, "string") {
		return ""
	}
	s := string(d.B[:n])
	d.B = d.B[n:]
	return s
}

func (d *Dec) Bytes(max int) []byte {
	n := d.Len(max, 1)
	if !d.need(n, "bytes") {
		return nil
	}
	b := append([]byte(nil), d.B[:n]...)
	d.B = d.B[n:]
	return b
}
