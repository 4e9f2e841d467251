package kv

import (
	"bytes"
	"testing"
)

// FuzzDecodeNode: any bytes decode to a node or an error, never a panic;
// whatever decodes encodes back to the same bytes.
func FuzzDecodeNode(f *testing.F) {
	f.Add(encodeLeaf([]entry{{key: []byte("a"), v: vref{inline: []byte("x")}}, {key: []byte("b"), v: vref{ext: true, off: 7, n: 100, crc: 9}}}))
	f.Add(encodeBranch([]child{{key: nil, off: 1, n: 20, count: 3}, {key: []byte("m"), off: 30, n: 40, count: 5}}))
	f.Add([]byte{kindLeaf, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		const at = 1 << 40
		nd, err := decodeNode(b, at)
		if err != nil {
			return
		}
		var again []byte
		if nd.leaf {
			again = encodeLeaf(nd.entries)
		} else {
			again = encodeBranch(nd.kids)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decoded %x, encodes to %x", b, again)
		}
	})
}

// FuzzDecodeTrailer: any 96 bytes decode to a trailer whose fields lie in
// range, or an error; a decoded trailer encodes back to the same bytes.
func FuzzDecodeTrailer(f *testing.F) {
	f.Add((&trailer{seq: 3, rootOff: 10, rootLen: 20, maxKey: 256, count: 4, sealed: 5, gen: 1, live: 100, tail: 2}).encode(), int64(1000))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		tr, err := decodeTrailer(b, size)
		if err != nil {
			return
		}
		if tr.rootOff+int64(tr.rootLen) > size-trailerSize || tr.sealed > size-trailerSize {
			t.Fatalf("trailer out of range for a file of %d bytes: %+v", size, tr)
		}
		if again := tr.encode(); !bytes.Equal(again, b) {
			t.Fatalf("decoded %x, encodes to %x", b, again)
		}
	})
}
