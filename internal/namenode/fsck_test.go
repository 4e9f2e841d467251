package namenode_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/namenode"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// TestFsckFindsProblemsAcrossPages: a namespace with broken metadata
// (wrong link count, a block shared by two files, unreachable directories
// and a cycle, an entry naming a missing inode) among thousands of files,
// checked in pages of a few dozen inodes: fsck reports exactly those
// problems.
func TestFsckFindsProblemsAcrossPages(t *testing.T) {
	t.Cleanup(namenode.SetFsckPageWork(50))
	store, err := meta.OpenSQLite(filepath.Join(t.TempDir(), "nn.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	dir := func(ino uint64) meta.Inode {
		return meta.Inode{Ino: ino, Type: meta.TypeDir, Mode: 0o755, User: "root", Group: "root", Nlink: 2}
	}
	file := func(ino uint64, nlink uint32, size int64) meta.Inode {
		return meta.Inode{Ino: ino, Type: meta.TypeFile, Mode: 0o644, User: "root", Group: "root", Nlink: nlink, Size: size, Rep: 1}
	}
	ent := func(parent uint64, name string, ino uint64) meta.Entry {
		return meta.Entry{EntryKey: meta.EntryKey{Parent: parent, Name: name}, Ino: ino}
	}
	c := &meta.Change{
		PutNodes:  []meta.Datanode{{ID: 1, Identity: "dn1", Blocks: 100, Enabled: true}},
		PutInodes: []meta.Inode{dir(2), dir(3), file(4, 2, 2<<16), file(5, 1, 1<<16), dir(6), dir(7), dir(8)},
		PutEntries: []meta.Entry{ent(1, "fill", 2), ent(1, "d", 3), ent(3, "f", 4), ent(1, "g", 5),
			ent(8, "x", 7), ent(7, "y", 8), ent(1, "missing", 99999)},
		Blocks: map[uint64][]meta.Extent{
			4: {{Index: 0, Count: 2, Replicas: []meta.Run{{Node: 1, Start: 0}}, CRC: []uint32{0, 0}}},
			5: {{Index: 0, Count: 1, Replicas: []meta.Run{{Node: 1, Start: 1}}, CRC: []uint32{0}}},
		},
		InoLimit: 5000,
	}
	for i := 0; i < 3000; i++ {
		c.PutInodes = append(c.PutInodes, file(100+uint64(i), 1, 0))
		c.PutEntries = append(c.PutEntries, ent(2, fmt.Sprintf("f%d", i), 100+uint64(i)))
	}
	if err := store.Apply(context.Background(), []*meta.Change{c}); err != nil {
		t.Fatal(err)
	}
	nn, err := namenode.New(namenode.Config{Cluster: "test", Blocksize: 64 << 10, Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go nn.Serve(ln)
	ctx := context.Background()
	cl, err := client.New(ctx, client.Config{Namenodes: []string{ln.Addr().String()}, Security: "none", DataSecurity: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rep, err := cl.Fsck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range rep.Problems {
		if strings.Contains(p, "on datanode dn1 (") {
			continue // dn1 is not running: its blocks cannot be verified
		}
		got = append(got, p)
	}
	want := []string{
		"/d/f: link count 2 but 1 names",
		"/g: block 0 shares datanode dn1 block 1 with /d/f block 1",
		"/missing: entry refers to missing inode 99999",
		"inode 6 is not reachable from /",
		"inode 7 is not reachable from /",
		"inode 8 is not reachable from /",
	}
	if !slices.Equal(got, want) {
		t.Errorf("fsck problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rep.Files != 3002 || rep.Blocks != 3 {
		t.Errorf("fsck checked %d files, %d blocks; want 3002, 3", rep.Files, rep.Blocks)
	}
}

// TestFsckCleanDuringCommits: fsck runs in pages of a few dozen inodes
// while other clients move directories back and forth, add and remove
// hard links, and create, write and remove files. Every check must come
// out clean: a page sees the namespace at another instant than the last,
// and what changed in between must not pass for a problem.
func TestFsckCleanDuringCommits(t *testing.T) {
	t.Cleanup(namenode.SetFsckPageWork(8))
	c := clustertest.StartInProcess(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	setup := c.Client(t)
	const subs, files = 8, 300
	if err := setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		for _, d := range []string{"/a", "/b", "/files", "/links", "/churn"} {
			if _, err := tx.Mkdir(ctx, d, 0); err != nil {
				return err
			}
		}
		for i := 0; i < subs; i++ {
			if _, err := tx.Mkdir(ctx, fmt.Sprintf("/a/sub%d", i), 0); err != nil {
				return err
			}
			for j := 0; j < 5; j++ {
				if _, err := tx.Create(ctx, fmt.Sprintf("/a/sub%d/f%d", i, j), client.CreateOptions{}); err != nil {
					return err
				}
			}
		}
		for i := 0; i < files; i++ {
			if _, err := tx.Create(ctx, fmt.Sprintf("/files/f%d", i), client.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		if _, err := setup.CopyIn(ctx, bytes.NewReader(bytes.Repeat([]byte{byte(i)}, 3<<16)), fmt.Sprintf("/files/data%d", i), client.CopyOptions{Rep: 2}); err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var ops atomic.Int64
	work := func(name string, fn func(cl *client.Client, i int) error) {
		cl := c.Client(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				if err := fn(cl, i); err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				ops.Add(1)
			}
		}()
	}
	txn := func(cl *client.Client, fn func(ctx context.Context, tx *client.Txn) error) error {
		return cl.Txn(ctx, fn)
	}
	work("mover", func(cl *client.Client, i int) error {
		k := i % subs
		from, to := fmt.Sprintf("/a/sub%d", k), fmt.Sprintf("/b/sub%d", k)
		if (i/subs)%2 == 1 {
			from, to = to, from
		}
		return txn(cl, func(ctx context.Context, tx *client.Txn) error { return tx.Rename(ctx, from, to) })
	})
	work("linker", func(cl *client.Client, i int) error {
		k := i % files
		l := fmt.Sprintf("/links/l%d", k)
		if (i/files)%2 == 0 {
			return txn(cl, func(ctx context.Context, tx *client.Txn) error { return tx.Link(ctx, fmt.Sprintf("/files/f%d", k), l) })
		}
		return txn(cl, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, l) })
	})
	work("writer", func(cl *client.Client, i int) error {
		name := fmt.Sprintf("/churn/w%d", i)
		if _, err := cl.CopyIn(ctx, bytes.NewReader(bytes.Repeat([]byte{byte(i)}, 1+i%(3<<16))), name, client.CopyOptions{Rep: 1 + i%2}); err != nil {
			return err
		}
		if i > 0 {
			return txn(cl, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, fmt.Sprintf("/churn/w%d", i-1)) })
		}
		return nil
	})
	work("mover2", func(cl *client.Client, i int) error {
		// Moves a file between directories and renames over it.
		from, to := "/files/data0", "/churn/data0"
		if i%2 == 1 {
			from, to = to, from
		}
		return txn(cl, func(ctx context.Context, tx *client.Txn) error { return tx.Rename(ctx, from, to) })
	})
	checker := c.Client(t)
	unsettled := 0
	for round := 0; round < 60 && !t.Failed(); round++ {
		rep, err := checker.Fsck(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Problems) > 0 {
			t.Errorf("fsck during commits (round %d) reports problems:\n%s", round, strings.Join(rep.Problems, "\n"))
		}
		unsettled += rep.Unsettled
	}
	stop.Store(true)
	wg.Wait()
	rep, err := checker.Fsck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 || rep.Unsettled != 0 {
		t.Errorf("fsck after the commits: %d unsettled, problems:\n%s", rep.Unsettled, strings.Join(rep.Problems, "\n"))
	}
	t.Logf("%d operations during the checks; %d inodes unsettled; final check: %d files, %d blocks", ops.Load(), unsettled, rep.Files, rep.Blocks)
}

// TestFsckScanSpansPages: the namenode's fsck scan is a series of
// requests, each one page under the namenode lock; between two pages other
// clients commit, and the scan still ends clean and counts every file.
func TestFsckScanSpansPages(t *testing.T) {
	t.Cleanup(namenode.SetFsckPageWork(10))
	c := clustertest.StartInProcess(t, clustertest.Options{Datanodes: 1})
	ctx := context.Background()
	setup := c.Client(t)
	if err := setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		for i := 0; i < 100; i++ {
			if _, err := tx.Create(ctx, fmt.Sprintf("/f%d", i), client.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	raw, err := rpc.Dial(ctx, c.Addr, auth.None, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	const txn = 7
	page := func(token uint64, begin bool) *wire.Response {
		t.Helper()
		q := &wire.Request{Op: wire.OpFsck, Txn: txn, Ino: token}
		if begin {
			q.Flags = wire.FlagBegin
		}
		r, err := raw.Call(ctx, q)
		if err != nil || r.Code != wire.OK {
			t.Fatalf("fsck page: %v %+v", err, r)
		}
		return r
	}
	r := page(0, true)
	if len(r.Counters) < 4 || r.Counters[1] != 0 {
		t.Fatalf("the first page of a scan of 100 files in pages of 10 ends it: counters %v", r.Counters)
	}
	// A commit between pages is not held up by the scan.
	if err := setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Create(ctx, "/during", client.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	pages, files := 1, r.Counters[2]
	var problems []string
	for r.Counters[1] == 0 {
		r = page(r.Counters[0], false)
		pages++
		files += r.Counters[2]
		problems = append(problems, r.Problems...)
	}
	if len(problems) > 0 || files < 100 {
		t.Fatalf("scan over %d pages: %d files, problems %v", pages, files, problems)
	}
	raw.Call(ctx, &wire.Request{Op: wire.OpAbort, Txn: txn})
	t.Logf("%d pages, %d files", pages, files)
}
