package client_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
)

// TestReadAheadSeesOwnWrites: a sequential reader has the next blocks
// fetched ahead; a write into a block fetched ahead, and a truncate, are
// what later reads return, not the bytes fetched before them.
func TestReadAheadSeesOwnWrites(t *testing.T) {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	const bs = 64 << 10
	data := make([]byte, 40*bs)
	for i := range data {
		data[i] = byte(i*13 + i/bs)
	}
	name := fmt.Sprintf("/readahead-%d", time.Now().UnixNano())
	if _, err := c.CopyIn(ctx, bytes.NewReader(data), name, client.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	tx := c.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(data)
	chunk := make([]byte, bs/2)
	read := func(off int) {
		t.Helper()
		if _, err := f.ReadAt(chunk, int64(off)); err != nil {
			t.Fatalf("ReadAt(%d): %v", off, err)
		}
		if !bytes.Equal(chunk, want[off:off+len(chunk)]) {
			t.Fatalf("ReadAt(%d) returned other bytes than the file holds", off)
		}
	}
	off := 0
	for ; off < 4*bs; off += len(chunk) {
		read(off) // sequential: blocks 4.. are being fetched ahead
	}
	// Overwrite part of a block fetched ahead, and of the next one.
	patch := bytes.Repeat([]byte{0xAB}, bs)
	if _, err := f.WriteAt(patch, 5*bs+100); err != nil {
		t.Fatal(err)
	}
	copy(want[5*bs+100:], patch)
	// Written out (no longer buffered): the reads must not fall back on
	// what was fetched ahead before the write.
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for ; off < 12*bs; off += len(chunk) {
		read(off)
	}
	if _, err := f.WriteAt(patch[:10], 14*bs); err != nil {
		t.Fatal(err)
	}
	copy(want[14*bs:], patch[:10])
	for ; off < 20*bs; off += len(chunk) {
		read(off)
	}
	// Truncate below blocks fetched ahead, then extend: zeros there.
	if err := f.Truncate(21*bs + 7); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(30 * bs); err != nil {
		t.Fatal(err)
	}
	clear(want[21*bs+7 : 30*bs])
	want = want[:30*bs]
	for ; off < 30*bs; off += len(chunk) {
		read(off)
	}
}
