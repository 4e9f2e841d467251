package security

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestAllocatedRunAttachedOnce: blocks allocated for one file at one index
// can be attached there only; never to a second file (deleting one would
// free blocks the other still reads) nor at another index.
func TestAllocatedRunAttachedOnce(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	conn := testkit.RawAs(t, c, c.IssueCredential("mallory", auth.RoleUser))
	admin := c.Client(client.Config{})
	defer admin.Close()
	ctx := context.Background()
	if err := admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Mkdir(ctx, "/m", 0o777)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	bs := c.Opts.Blocksize
	a := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCreate, Txn: 1, Flags: wire.FlagBegin, Path: "/m/a", Type: wire.TypeFile}).Attr.Ino
	b := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCreate, Txn: 1, Path: "/m/b", Type: wire.TypeFile}).Attr.Ino
	al := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpAllocate, Txn: 1, Ino: a, Index: 0, Count: 1})
	run := al.Extents[0].Replicas[0]
	attach := func(ino, index uint64) *wire.Response {
		r, err := conn.Call(ctx, &wire.Request{Op: wire.OpSetBlocks, Txn: 1, Ino: ino, Flags: wire.FlagSize, Size: 8 * bs,
			Extents: []wire.Extent{{Index: index, Count: 1, CRC: []uint32{0}, Replicas: []wire.Run{run}, Gen: al.Extents[0].Gen}}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := attach(b, 0); r.Code != wire.ErrCodeInvalid {
		t.Fatalf("run allocated for /m/a attached to /m/b: %+v, want refused", r)
	}
	if r := attach(a, 3); r.Code != wire.ErrCodeInvalid {
		t.Fatalf("run allocated for block 0 attached as block 3: %+v, want refused", r)
	}
	if r := attach(a, 0); r.Code != wire.OK {
		t.Fatalf("run attached where it was allocated: %+v", r)
	}
	r, err := conn.Call(ctx, &wire.Request{Op: wire.OpSetBlocks, Txn: 1, Ino: a, Flags: wire.FlagSize, Size: -5})
	if err != nil || r.Code != wire.ErrCodeInvalid {
		t.Fatalf("negative size: %v %+v, want refused", err, r)
	}
}

// TestDeniedOpTakesNoLock: a refused change leaves nothing locked, so a
// user cannot freeze inodes he may not change.
func TestDeniedOpTakesNoLock(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	conn := testkit.RawAs(t, c, c.IssueCredential("mallory", auth.RoleUser))
	admin := c.Client(client.Config{})
	defer admin.Close()
	ctx := context.Background()
	testkit.WriteFile(t, admin, "/owned", testkit.RandomBytes(t, 100), 1)
	fi, err := admin.Lookup(ctx, "/owned")
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range []*wire.Request{
		{Op: wire.OpSetAttr, Ino: 1, Flags: wire.FlagMode, Mode: 0o777},
		{Op: wire.OpSetAttr, Ino: fi.Ino, Flags: wire.FlagSize, Size: 0},
		{Op: wire.OpAllocate, Ino: fi.Ino, Index: 0, Count: 1},
		{Op: wire.OpSetBlocks, Ino: fi.Ino},
	} {
		q.Txn = 1
		if i == 0 {
			q.Flags |= wire.FlagBegin
		}
		r, err := conn.Call(ctx, q)
		if err != nil || r.Code != wire.ErrCodePerm {
			t.Fatalf("%s by another user: %v %+v, want permission denied", q.Op, err, r)
		}
	}
	// Mallory's transaction stays open; the owner is not blocked.
	err = admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		if _, err := tx.Mkdir(ctx, "/newtop", 0); err != nil {
			return err
		}
		mode := fs.FileMode(0o600)
		if _, err := tx.SetAttr(ctx, 1, client.SetAttr{Mtime: testkit.Ptr(fi.Mtime)}); err != nil {
			return err
		}
		_, err := tx.SetAttr(ctx, fi.Ino, client.SetAttr{Mode: &mode})
		return err
	})
	if err != nil {
		t.Fatalf("owner's changes while a refused transaction is open: %v", err)
	}
}

// TestInodeAccessFollowsPaths: reaching a file by inode number is allowed
// only where some path to it is searchable, so a user refused
// /alice/private/f cannot stat, open, list or change it by number.
func TestInodeAccessFollowsPaths(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	aliceCred := c.IssueCredential("alice", auth.RoleUser)
	c.MustRun("mkdir", "/alice")
	c.MustRun("chown", "alice:alice", "/alice")
	env := []string{"PLASMAFS_CREDENTIAL=" + aliceCred}
	for _, args := range [][]string{{"mkdir", "/alice/private"}, {"chmod", "700", "/alice/private"}} {
		if out, code := c.RunEnv(env, nil, args...); code != 0 {
			t.Fatal(out)
		}
	}
	if out, code := c.RunEnv(env, []byte("alice's secret"), "put", "-stdin", "/alice/private/f"); code != 0 {
		t.Fatal(out)
	}
	admin := c.Client(client.Config{})
	defer admin.Close()
	ctx := context.Background()
	f, err := admin.Lookup(ctx, "/alice/private/f")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := admin.Lookup(ctx, "/alice/private")
	if err != nil {
		t.Fatal(err)
	}
	bob := c.Client(client.Config{CredentialFile: c.IssueCredential("bob", auth.RoleUser)})
	defer bob.Close()
	tx := bob.Begin()
	defer tx.Abort(ctx)
	if _, err := tx.StatInode(ctx, f.Ino); !errors.Is(err, client.ErrPermission) {
		t.Errorf("stat by inode: %v, want permission denied", err)
	}
	if _, err := tx.OpenInode(ctx, f.Ino); !errors.Is(err, client.ErrPermission) {
		t.Errorf("open by inode: %v, want permission denied", err)
	}
	if _, err := tx.Blocks(ctx, f.Ino); !errors.Is(err, client.ErrPermission) {
		t.Errorf("block list by inode: %v, want permission denied", err)
	}
	if _, err := tx.StatInode(ctx, dir.Ino); err != nil {
		t.Errorf("stat of /alice/private itself (its parent is searchable): %v", err)
	}
	conn := testkit.RawAs(t, c, c.IssueCredential("bob2", auth.RoleUser))
	r, err := conn.Call(ctx, &wire.Request{Op: wire.OpReadDir, Txn: 9, Flags: wire.FlagBegin, Ino: dir.Ino})
	if err != nil || r.Code != wire.ErrCodePerm {
		t.Errorf("readdir by inode: %v %+v, want permission denied", err, r)
	}
	// Alice reaches her own file by number.
	al := c.Client(client.Config{CredentialFile: aliceCred})
	defer al.Close()
	atx := al.Begin()
	defer atx.Abort(ctx)
	af, err := atx.OpenInode(ctx, f.Ino)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, af.Size())
	if _, err := af.ReadAt(got, 0); err != nil || string(got) != "alice's secret" {
		t.Fatalf("owner by inode: %q %v", got, err)
	}
}

// TestStickyDirectory: in a 1777 directory nobody removes or renames
// another user's files.
func TestStickyDirectory(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("mkdir", "/shared")
	c.MustRun("chmod", "1777", "/shared")
	alice := []string{"PLASMAFS_CREDENTIAL=" + c.IssueCredential("alice", auth.RoleUser)}
	bob := []string{"PLASMAFS_CREDENTIAL=" + c.IssueCredential("bob", auth.RoleUser)}
	for _, f := range []struct {
		env  []string
		path string
	}{{alice, "/shared/a"}, {bob, "/shared/b"}} {
		if out, code := c.RunEnv(f.env, []byte("x"), "put", "-stdin", f.path); code != 0 {
			t.Fatal(out)
		}
	}
	for _, args := range [][]string{
		{"rm", "/shared/a"},
		{"mv", "/shared/a", "/shared/mine"},
		{"mv", "/shared/b", "/shared/a"},
	} {
		if out, code := c.RunEnv(bob, nil, args...); code == 0 || !strings.Contains(out, "permission denied") {
			t.Errorf("bob %v in a sticky directory: exit %d %q, want permission denied", args, code, out)
		}
	}
	if out, code := c.RunEnv(bob, nil, "mv", "/shared/b", "/shared/b2"); code != 0 {
		t.Errorf("bob renames his own file: %s", out)
	}
	if out, code := c.RunEnv(alice, nil, "rm", "/shared/a"); code != 0 {
		t.Errorf("alice removes her own file: %s", out)
	}
}

// TestAllocationBounded: one user's uncommitted transactions cannot take
// all free space, and an allocation that fails gives back what it took.
func TestAllocationBounded(t *testing.T) {
	ctx := context.Background()
	t.Run("per-user limit", func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Size: 16 << 20}) // 2 × 256 blocks
		conn := testkit.RawAs(t, c, c.IssueCredential("mallory", auth.RoleUser))
		admin := c.Client(client.Config{})
		defer admin.Close()
		if err := admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			_, err := tx.Mkdir(ctx, "/m", 0o777)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ino := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCreate, Txn: 1, Flags: wire.FlagBegin, Path: "/m/hog", Type: wire.TypeFile}).Attr.Ino
		held := uint64(0)
		for i := uint64(0); ; i++ {
			r, err := conn.Call(ctx, &wire.Request{Op: wire.OpAllocate, Txn: 1, Ino: ino, Index: i * 32, Count: 32})
			if err != nil {
				t.Fatal(err)
			}
			if r.Code != wire.OK {
				if r.Code != wire.ErrCodeNoSpace || !strings.Contains(r.Msg, "limit") {
					t.Fatalf("allocation refused with %+v, want the per-user limit", r)
				}
				break
			}
			held += 32
			if held > 512 {
				t.Fatal("one user's transaction took every block")
			}
		}
		// Mallory's transaction is still open; others still write.
		testkit.WriteFile(t, admin, "/other", testkit.RandomBytes(t, 40*int(c.Opts.Blocksize)), 1)
	})
	t.Run("failed allocation releases", func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Size: 16 << 20, NamenodeArgs: []string{"-user-alloc-limit", "100000"}})
		conn := testkit.RawAs(t, c, c.AdminCred)
		admin := c.Client(client.Config{})
		defer admin.Close()
		before, err := admin.FsStat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ino := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCreate, Txn: 1, Flags: wire.FlagBegin, Path: "/big", Type: wire.TypeFile}).Attr.Ino
		r, err := conn.Call(ctx, &wire.Request{Op: wire.OpAllocate, Txn: 1, Ino: ino, Index: 0, Count: before.FreeBlocks + 10})
		if err != nil || r.Code != wire.ErrCodeNoSpace {
			t.Fatalf("allocating more than is free: %v %+v, want no space", err, r)
		}
		after, err := admin.FsStat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after.UsedBlocks != before.UsedBlocks {
			t.Fatalf("failed allocation kept %d blocks while its transaction is open", after.UsedBlocks-before.UsedBlocks)
		}
	})
}

// TestWriteTicketDoesNotRead: blocks just allocated still hold what their
// previous owner wrote; the write ticket that allocation hands out must not
// read (or verify) them.
func TestWriteTicketDoesNotRead(t *testing.T) {
	// One datanode of 8 blocks: the probe's allocation can only take the
	// deleted victim's blocks.
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, Size: 8 * 64 << 10, NamenodeArgs: []string{"-user-alloc-limit", "100"}})
	admin := c.Client(client.Config{})
	defer admin.Close()
	ctx := context.Background()
	// A victim's file, deleted: its blocks go back to the allocator.
	testkit.WriteFile(t, admin, "/victim", bytes.Repeat([]byte("secret!!"), int(c.Opts.Blocksize)), 1)
	if err := admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, "/victim") }); err != nil {
		t.Fatal(err)
	}
	if err := admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Mkdir(ctx, "/m", 0o777)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	credFile := c.IssueCredential("mallory", auth.RoleUser)
	cred, err := auth.LoadCredential(credFile)
	if err != nil {
		t.Fatal(err)
	}
	conn := testkit.RawAs(t, c, credFile)
	ino := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCreate, Txn: 1, Flags: wire.FlagBegin, Path: "/m/probe", Type: wire.TypeFile}).Attr.Ino
	al := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpAllocate, Txn: 1, Ino: ino, Index: 0, Count: 8})
	x := al.Extents[0]
	dn := al.Nodes[0]
	for _, n := range al.Nodes {
		if n.ID == x.Replicas[0].Node {
			dn = n
		}
	}
	for _, op := range []wire.DataOp{wire.DataRead, wire.DataVerify} {
		r := testkit.DataCall(t, dn.Addr, cred, &wire.DataReq{Op: op, Block: x.Replicas[0].Start, Count: 1, Ticket: x.Tickets[0]}, nil)
		if r.Status == wire.OK {
			t.Fatalf("%v of a freshly allocated block with its write ticket was allowed", op)
		}
	}
	// Nor can the blocks be attached unwritten (with made-up checksums)
	// and read through the file's read tickets.
	x.Tickets = nil
	x.CRC = make([]uint32, x.Count)
	testkit.MustCall(t, conn, &wire.Request{Op: wire.OpSetBlocks, Txn: 1, Ino: ino, Extents: []wire.Extent{x}, Flags: wire.FlagSize, Size: int64(x.Count) * c.Opts.Blocksize})
	testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCommit, Txn: 1})
	br := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpBlocks, Txn: 2, Flags: wire.FlagBegin, Ino: ino})
	got := br.Extents[0]
	for _, op := range []wire.DataOp{wire.DataRead, wire.DataVerify} {
		r := testkit.DataCall(t, dn.Addr, cred, &wire.DataReq{Op: op, Block: got.Replicas[0].Start, Count: 1, Ticket: got.Tickets[0]}, nil)
		if r.Status == wire.OK {
			t.Fatalf("%v of blocks attached without being written was allowed (they hold a deleted file's data)", op)
		}
	}
}
