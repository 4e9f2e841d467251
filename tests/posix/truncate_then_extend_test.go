package posix

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestBareTruncateThenExtendReadsZeros: a file shrunk with Txn.Truncate
// (SetAttr size, no File) and later extended must read zeros past the
// old cut. Today the partial last block keeps its old bytes, which come
// back on extension (File.Truncate rewrites that block zeroed; the bare
// size change did not). Txn.Truncate now goes through the file.
func TestBareTruncateThenExtendReadsZeros(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	data := testkit.SeededBytes(100000, 9)
	testkit.MustOK(t, "write", libTarget{cl, "/"}.writeFile("f", data))
	fi, err := cl.Lookup(ctx, "/f")
	testkit.MustOK(t, "lookup", err)
	testkit.MustOK(t, "shrink", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Truncate(ctx, fi.Ino, 1000) }))
	testkit.MustOK(t, "extend", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Truncate(ctx, fi.Ino, 70000) }))
	var got []byte
	testkit.MustOK(t, "read", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, "/f")
		if err != nil {
			return err
		}
		got, err = io.ReadAll(f)
		return err
	}))
	want := append(append([]byte(nil), data[:1000]...), make([]byte, 69000)...)
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("after shrinking to 1000 and extending to 70000, byte %d differs (old data came back)", i)
	}
}

// TestAutoSizeChangeReadsZeros: a size change through an Auto transaction
// (one request, committed with it) also goes through the file: shrinking
// and growing again reads zeros past the cut, and growing past an append
// that was never committed does not bring its bytes back.
func TestAutoSizeChangeReadsZeros(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	data := testkit.SeededBytes(100000, 11)
	testkit.MustOK(t, "write", libTarget{cl, "/"}.writeFile("f", data))
	fi, err := cl.Lookup(ctx, "/f")
	testkit.MustOK(t, "lookup", err)
	size := func(n int64, d clientx.Durability) {
		t.Helper()
		got, err := clientx.Auto(cl, d).SetAttr(ctx, fi.Ino, client.SetAttr{Size: &n})
		testkit.MustOK(t, fmt.Sprintf("auto size %d", n), err)
		if got.Size != n {
			t.Fatalf("auto size %d: the answer says %d", n, got.Size)
		}
	}
	size(1000, clientx.Durable)
	size(70000, clientx.Async)
	want := append(bytes.Clone(data[:1000]), make([]byte, 69000)...)
	if got := testkit.ReadWhole(t, cl, "/f"); !bytes.Equal(got, want) {
		t.Fatal("after an auto shrink to 1000 and growth to 70000, old bytes came back")
	}
	// A committed append (block 1 was a hole), one flushed and aborted
	// (it extends block 1 in place), then an auto growth past them.
	add := testkit.SeededBytes(100, 12)
	testkit.AppendTo(t, cl, "/f", add, false)
	want = append(want, add...)
	testkit.AppendTo(t, cl, "/f", bytes.Repeat([]byte{0xAB}, 3000), true)
	size(200000, clientx.Durable)
	want = append(want, make([]byte, 200000-len(want))...)
	if got := testkit.ReadWhole(t, cl, "/f"); !bytes.Equal(got, want) {
		t.Fatal("after an aborted append and an auto growth, the file reads other bytes than zeros past its end")
	}
}
