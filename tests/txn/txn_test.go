package txn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

func TestConcurrentWritersSameFileConflict(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	testkit.WriteFile(t, cl, "/shared", []byte("base"), 1)

	tx1 := cl.Begin()
	tx2 := cl.Begin()
	f1, err := tx1.Open(ctx, "/shared")
	if err != nil {
		t.Fatal(err)
	}
	f2, err := tx2.Open(ctx, "/shared")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f1.WriteAt([]byte("one"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f1.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f2.WriteAt([]byte("two"), 0)
	err = f2.Flush(ctx)
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("second writer: got %v, want ErrConflict", err)
	}
	tx2.Abort(ctx)
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := testkit.ReadFile(t, cl, "/shared"); string(got) != "onee" {
		t.Fatalf("content %q", got)
	}
	// Two transactions creating the same name: the second conflicts at once.
	a := cl.Begin()
	b := cl.Begin()
	if _, err := a.Mkdir(ctx, "/d", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Mkdir(ctx, "/d", 0); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("second mkdir: %v", err)
	}
	a.Commit(ctx)
	b.Abort(ctx)
}

func TestConcurrentWritersDifferentFilesCommit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl1 := c.Client(client.Config{})
	defer cl1.Close()
	cl2 := c.Client(client.Config{})
	defer cl2.Close()
	ctx := context.Background()
	d1, d2 := testkit.RandomBytes(t, 500000), testkit.RandomBytes(t, 700000)
	tx1 := cl1.Begin()
	tx2 := cl2.Begin()
	f1, err := tx1.CreateFile(ctx, "/a", client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f2, err := tx2.CreateFile(ctx, "/b", client.CreateOptions{Rep: 2})
	if err != nil {
		t.Fatal(err)
	}
	f1.Write(d1)
	f2.Write(d2)
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(testkit.ReadFile(t, cl1, "/a"), d1) || !bytes.Equal(testkit.ReadFile(t, cl1, "/b"), d2) {
		t.Fatal("content mismatch")
	}
}

// TestReaderKeepsOldVersion: a reader that loaded the block list keeps
// reading the old content while a writer replaces the file and commits,
// even when other writes reuse free space meanwhile.
func TestReaderKeepsOldVersion(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Size: 8 << 20}) // 128 blocks per node: space is tight
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	old := testkit.RandomBytes(t, 40*bs)
	testkit.WriteFile(t, cl, "/f", old, 2)

	rtx := cl.Begin()
	defer rtx.Abort(ctx)
	rf, err := rtx.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, bs)
	if _, err := rf.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	// Replace the whole content, then delete and refill the space.
	newer := testkit.RandomBytes(t, 40*bs)
	if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, "/f")
		if err != nil {
			return err
		}
		_, err = f.WriteAt(newer, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// 128 blocks per datanode: 40 hold the old version (still in use by
	// the reader), 40 the new one. Fill the remaining 48 and free them again.
	testkit.WriteFile(t, cl, "/filler", testkit.RandomBytes(t, 48*bs), 2)
	if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, "/filler") }); err != nil {
		t.Fatal(err)
	}
	// Nothing may be reused while the reader's transaction is open.
	_, err = cl.CopyIn(ctx, bytes.NewReader(make([]byte, bs)), "/more", client.CopyOptions{Rep: 2})
	if !errors.Is(err, client.ErrNoSpace) {
		t.Fatalf("allocation while old blocks are protected: %v, want ErrNoSpace", err)
	}
	rest := make([]byte, len(old))
	if _, err := rf.ReadAt(rest, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if !bytes.Equal(rest, old) {
		t.Fatal("reader saw changed content inside its transaction")
	}
	rtx.Abort(ctx)
	if !bytes.Equal(testkit.ReadFile(t, cl, "/f"), newer) {
		t.Fatal("new transaction does not see the committed content")
	}
	// Once the reader ended, the old version's and the filler's blocks are free.
	testkit.WriteFile(t, cl, "/more", testkit.RandomBytes(t, 88*bs), 2)
}

// TestUnlinkWhileOpen: an unlinked file stays readable by a transaction
// that uses it; its blocks are freed when that transaction ends.
func TestUnlinkWhileOpen(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	data := testkit.RandomBytes(t, 20*int(c.Opts.Blocksize))
	testkit.WriteFile(t, cl, "/victim", data, 1)
	before, _ := cl.FsStat(ctx)

	rtx := cl.Begin()
	rf, err := rtx.Open(ctx, "/victim")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, "/victim") }); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := rf.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("unlinked-open file reads wrong")
	}
	mid, _ := cl.FsStat(ctx)
	if mid.UsedBlocks != before.UsedBlocks {
		t.Fatalf("blocks freed while still in use: %d -> %d", before.UsedBlocks, mid.UsedBlocks)
	}
	rtx.Abort(ctx)
	after, _ := cl.FsStat(ctx)
	if after.UsedBlocks != before.UsedBlocks-20 {
		t.Fatalf("used blocks %d after last user ended, want %d", after.UsedBlocks, before.UsedBlocks-20)
	}
	if out := c.MustRun("fsck"); !bytes.Contains([]byte(out), []byte("0 problems")) {
		t.Fatal(out)
	}
}

// TestReadNeedsNoNamenode: after the block list is loaded, reading the
// whole file (sequentially and at random) sends no namenode request.
func TestReadNeedsNoNamenode(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	data := testkit.RandomBytes(t, 64*bs+5)
	testkit.WriteFile(t, cl, "/r", data, 2)
	tx := cl.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, "/r")
	if err != nil {
		t.Fatal(err)
	}
	one := make([]byte, 1)
	f.ReadAt(one, 0)
	stats0, err := clientx.NamenodeStats(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	client0 := clientx.NamenodeRequests(cl)
	buf := make([]byte, bs)
	for i := 0; i < 200; i++ {
		blk := (i * 37) % 65
		n, err := f.ReadAt(buf, int64(blk*bs))
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], data[blk*bs:blk*bs+n]) {
			t.Fatalf("block %d differs", blk)
		}
	}
	var all bytes.Buffer
	f.Seek(0, io.SeekStart)
	io.Copy(&all, f)
	if !bytes.Equal(all.Bytes(), data) {
		t.Fatal("sequential read differs")
	}
	if d := clientx.NamenodeRequests(cl) - client0; d != 0 {
		t.Fatalf("client sent %d namenode requests while reading", d)
	}
	stats1, _ := clientx.NamenodeStats(ctx, cl)
	// Between the two samples the namenode serves the second stats call,
	// datanode heartbeats and connection keepalives, nothing else.
	d := stats1.Requests - stats0.Requests - (stats1.PerOp["heartbeat"] - stats0.PerOp["heartbeat"]) -
		(stats1.PerOp["keepalive"] - stats0.PerOp["keepalive"])
	if d != 1 {
		t.Fatalf("namenode served %d client requests during the read phase, want only the stats call", d-1)
	}
}
