package extend

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Small appends extend the committed last block in place (client/extend.go,
// datanode.BlockStore.Extend); these tests run them against real processes
// with tickets (security privacy, data auth) and two replicas.

// blocksOf returns the block list of path, as [index]"datanode:start,…".
func blocksOf(t *testing.T, cl *client.Client, path string) map[uint64]string {
	t.Helper()
	ctx := context.Background()
	out := map[uint64]string{}
	testkit.MustOK(t, "blocks", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		fi, err := tx.Lookup(ctx, path)
		if err != nil {
			return err
		}
		xs, err := tx.Blocks(ctx, fi.Ino)
		if err != nil {
			return err
		}
		for _, x := range xs {
			for k := 0; k < x.Count; k++ {
				s := ""
				for _, r := range x.Replicas {
					s += fmt.Sprintf("%s:%d,", r.Datanode, r.Start+uint64(k))
				}
				out[x.Index+uint64(k)] = s
			}
		}
		return nil
	}))
	return out
}

// TestAppendExtendsInPlace: a small append to a file whose last block is
// partly filled lands in that same block on both replicas, and a reader
// that opened the file before keeps reading its version.
func TestAppendExtendsInPlace(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	data := testkit.SeededBytes(40000, 3) // blocksize 64 KiB: one partly filled block
	testkit.WriteRep2(t, cl, "/log", data)
	before := blocksOf(t, cl, "/log")

	// Readers of the first version, opened before the append: one reads
	// the local datanodes' block files itself, one asks the datanodes.
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	var olds []*client.File
	for _, rc := range []*client.Client{cl, tcp} {
		rd := rc.Begin()
		defer rd.Abort(ctx)
		f, err := rd.Open(ctx, "/log")
		testkit.MustOK(t, "open reader", err)
		olds = append(olds, f)
	}

	add := testkit.SeededBytes(64, 4)
	testkit.AppendTo(t, cl, "/log", add, false)
	if after := blocksOf(t, cl, "/log"); after[0] != before[0] {
		t.Fatalf("the append copied the block (%s → %s) instead of extending it in place", before[0], after[0])
	}
	want := append(bytes.Clone(data), add...)
	if got := testkit.ReadWhole(t, cl, "/log"); !bytes.Equal(got, want) {
		t.Fatalf("after the append the file reads %d bytes, not the %d written", len(got), len(want))
	}
	for i, old := range olds {
		got, err := io.ReadAll(old)
		testkit.MustOK(t, fmt.Sprintf("reader %d: read the first version after the append", i), err)
		if !bytes.Equal(got, data) {
			t.Fatalf("reader %d of the first version read %d bytes, not its %d", i, len(got), len(data))
		}
	}
	// Many appends, each committed, crossing into the next block.
	for i := 0; i < 60; i++ {
		add := testkit.SeededBytes(500, uint64(10+i))
		testkit.AppendTo(t, cl, "/log", add, false)
		want = append(want, add...)
	}
	if got := testkit.ReadWhole(t, cl, "/log"); !bytes.Equal(got, want) {
		t.Fatal("after 60 appends the file reads other bytes than were written")
	}
	testkit.FsckClean(t, cl)
}

// TestUncommittedExtensionStaysHidden: an extension whose transaction
// aborted leaves bytes in the block past its committed end; fsck does not
// count them, the next append overwrites them, and growing the file past
// the block (truncate upwards) reads zeros there, not them.
func TestUncommittedExtensionStaysHidden(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	data := testkit.SeededBytes(40000, 5)
	testkit.WriteRep2(t, cl, "/f", data)
	before := blocksOf(t, cl, "/f")
	testkit.AppendTo(t, cl, "/f", bytes.Repeat([]byte{0xEE}, 3000), true) // aborted
	if got := testkit.ReadWhole(t, cl, "/f"); !bytes.Equal(got, data) {
		t.Fatal("an aborted append changed the file")
	}
	testkit.FsckClean(t, cl)

	// The next append finds the block holding more than its committed
	// version: it copies the block, into a clean one; the one after that
	// extends the copy in place again.
	add := testkit.SeededBytes(10, 6)
	testkit.AppendTo(t, cl, "/f", add, false)
	copied := blocksOf(t, cl, "/f")
	if copied[0] == before[0] {
		t.Fatalf("the append after an aborted one extended the block (%s) over the aborted bytes", before[0])
	}
	add2 := testkit.SeededBytes(20, 7)
	testkit.AppendTo(t, cl, "/f", add2, false)
	if after := blocksOf(t, cl, "/f"); after[0] != copied[0] {
		t.Fatalf("the append after the copy copied again (%s → %s)", copied[0], after[0])
	}
	want := append(append(bytes.Clone(data), add...), add2...)
	if got := testkit.ReadWhole(t, cl, "/f"); !bytes.Equal(got, want) {
		t.Fatal("the appends after an aborted one read other bytes")
	}

	// Another aborted extension, then the file grows past the block.
	testkit.AppendTo(t, cl, "/f", bytes.Repeat([]byte{0xDD}, 5000), true)
	fi, err := cl.Lookup(ctx, "/f")
	testkit.MustOK(t, "lookup", err)
	testkit.MustOK(t, "truncate up", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		return tx.Truncate(ctx, fi.Ino, 200000)
	}))
	want = append(want, make([]byte, 200000-len(want))...)
	if got := testkit.ReadWhole(t, cl, "/f"); !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("after growing past the block, byte %d of %d differs: an uncommitted extension became file content", i, len(got))
	}
	// And with a write further on instead of a truncate.
	testkit.WriteRep2(t, cl, "/g", data)
	testkit.AppendTo(t, cl, "/g", bytes.Repeat([]byte{0xCC}, 5000), true)
	testkit.MustOK(t, "write further on", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, "/g")
		if err != nil {
			return err
		}
		_, err = f.WriteAt([]byte("end"), 3*64<<10)
		return err
	}))
	wantG := append(append(bytes.Clone(data), make([]byte, 3*64<<10-len(data))...), "end"...)
	if got := testkit.ReadWhole(t, cl, "/g"); !bytes.Equal(got, wantG) {
		t.Fatal("after a write past the block, the file reads other bytes: an uncommitted extension became file content")
	}
	testkit.FsckClean(t, cl)
}

// TestAppendThenUseTheBlock: an append leaves the block's committed bytes
// unread; reading the block in the same transaction, writing before the
// append in it, truncating, and a second flush in one transaction (which
// copies on write: one extension per transaction) all see those bytes.
func TestAppendThenUseTheBlock(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	base := testkit.SeededBytes(bs+30000, 7)
	cases := []struct {
		name string
		do   func(f *client.File, want []byte) []byte
	}{
		{"read back before the flush", func(f *client.File, want []byte) []byte {
			got := make([]byte, 200)
			_, err := f.ReadAt(got, int64(bs+29900))
			testkit.MustOK(t, "read back", err)
			if !bytes.Equal(got, want[bs+29900:bs+30100]) {
				t.Errorf("read back before the flush: other bytes than the file holds")
			}
			return want
		}},
		{"write before the append", func(f *client.File, want []byte) []byte {
			_, err := f.WriteAt([]byte("early"), int64(bs+100))
			testkit.MustOK(t, "write before", err)
			copy(want[bs+100:], "early")
			return want
		}},
		{"truncate", func(f *client.File, want []byte) []byte {
			testkit.MustOK(t, "truncate", f.Truncate(int64(bs+20000)))
			return want[:bs+20000]
		}},
		{"two flushes", func(f *client.File, want []byte) []byte {
			testkit.MustOK(t, "flush", f.Flush(ctx))
			more := testkit.SeededBytes(300, 8)
			_, err := f.WriteAt(more, int64(len(want)))
			testkit.MustOK(t, "second append", err)
			return append(want, more...)
		}},
	}
	for i, tc := range cases {
		path := fmt.Sprintf("/use%d", i)
		testkit.WriteRep2(t, cl, path, base)
		want := bytes.Clone(base)
		testkit.MustOK(t, tc.name, cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			want = bytes.Clone(base)
			f, err := tx.Open(ctx, path)
			if err != nil {
				return err
			}
			add := testkit.SeededBytes(100, uint64(20+i))
			if _, err := f.WriteAt(add, f.Size()); err != nil {
				return err
			}
			want = tc.do(f, append(want, add...))
			return nil
		}))
		if got := testkit.ReadWhole(t, cl, path); !bytes.Equal(got, want) {
			t.Errorf("%s: the file reads %d bytes, other than the %d expected", tc.name, len(got), len(want))
		}
	}
	testkit.FsckClean(t, cl)
}

// TestAppendTruncateWrite: an append whose block's committed bytes were
// left unread, a truncate below them, and a write where the append was:
// the file holds the write, not the committed bytes the truncate cut
// (found by review: the unread prefix was fetched over the new bytes).
func TestAppendTruncateWrite(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	for _, noSC := range []bool{true, false} {
		cl := c.Client(client.Config{NoShortCircuit: noSC})
		path := fmt.Sprintf("/t%v", noSC)
		base := testkit.SeededBytes(bs+100, 11)
		testkit.WriteRep2(t, cl, path, base)
		y := []byte("YYYYY")
		testkit.MustOK(t, "append, truncate, write", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, path)
			if err != nil {
				return err
			}
			if _, err := f.WriteAt([]byte("appended"), int64(bs+100)); err != nil {
				return err
			}
			if err := f.Truncate(int64(bs)); err != nil {
				return err
			}
			_, err = f.WriteAt(y, int64(bs))
			return err
		}))
		if got := testkit.ReadWhole(t, cl, path); !bytes.Equal(got, append(bytes.Clone(base[:bs]), y...)) {
			t.Errorf("short-circuit off=%v: the file ends in %q, want %q", noSC, got[bs:], y)
		}
		cl.Close()
	}
}

// TestWriteOnlyFileGrows: a user who may write a file but not read it can
// append to it and grow it (a write further on, a size change), as before
// appends extended blocks in place (found by review: growing the file
// asked for the block list, which she may not have).
func TestWriteOnlyFileGrows(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	admin := c.Client(client.Config{})
	defer admin.Close()
	alice := c.Client(client.Config{CredentialFile: c.IssueCredential("alice", auth.RoleUser)})
	defer alice.Close()
	ctx := context.Background()
	data := testkit.SeededBytes(100, 13)
	testkit.MustOK(t, "create", admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.CreateFile(ctx, "/wo", client.CreateOptions{Mode: 0o622, Rep: 2})
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		return err
	}))
	fi, err := admin.Lookup(ctx, "/wo")
	testkit.MustOK(t, "lookup", err)
	testkit.MustOK(t, "alice appends", alice.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.OpenInode(ctx, fi.Ino)
		if err != nil {
			return err
		}
		_, err = f.WriteAt([]byte("more"), 100)
		return err
	}))
	testkit.MustOK(t, "alice writes further on", alice.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.OpenInode(ctx, fi.Ino)
		if err != nil {
			return err
		}
		_, err = f.WriteAt([]byte("x"), 200000)
		return err
	}))
	n := int64(300000)
	_, err = clientx.Auto(alice, clientx.Durable).SetAttr(ctx, fi.Ino, client.SetAttr{Size: &n})
	testkit.MustOK(t, "alice grows it", err)
	want := make([]byte, n)
	copy(want, data)
	copy(want[100:], "more")
	want[200000] = 'x'
	if got := testkit.ReadWhole(t, admin, "/wo"); !bytes.Equal(got, want) {
		t.Fatal("the write-only file reads other bytes than alice wrote")
	}
}
