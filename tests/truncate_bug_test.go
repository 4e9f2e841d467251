package tests

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
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
	data := randBytes(100000, 9)
	mustOK(t, "write", libTarget{cl, "/"}.writeFile("f", data))
	fi, err := cl.Lookup(ctx, "/f")
	mustOK(t, "lookup", err)
	mustOK(t, "shrink", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Truncate(ctx, fi.Ino, 1000) }))
	mustOK(t, "extend", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Truncate(ctx, fi.Ino, 70000) }))
	var got []byte
	mustOK(t, "read", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
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
