package core

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestInodeNameOps: the operations addressed by directory inode and name,
// each committed in the same round trip, give the namespace the path
// operations would.
func TestInodeNameOps(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	before, _ := clientx.NamenodeStats(ctx, cl)
	d, err := clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(ctx, 1, "d", 0o750)
	if err != nil {
		t.Fatal(err)
	}
	e, err := clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(ctx, d.Ino, "e", 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := clientx.At(clientx.Auto(cl, clientx.Durable)).CreateAt(ctx, d.Ino, "f", client.CreateOptions{Mode: 0o640})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := clientx.NamenodeStats(ctx, cl)
	// Three changes, three requests, three commits (plus the stats call).
	if got := after.Requests - before.Requests - (after.PerOp["heartbeat"] - before.PerOp["heartbeat"]) - (after.PerOp["keepalive"] - before.PerOp["keepalive"]); got != 4 {
		t.Errorf("three compound changes took %d requests, want 3 (+1 stats)", got-1)
	}
	if after.Commits-before.Commits != 3 {
		t.Errorf("%d commits, want 3", after.Commits-before.Commits)
	}
	if fi, err := cl.Lookup(ctx, "/d/f"); err != nil || fi.Ino != f.Ino || fi.Mode.Perm() != 0o640 {
		t.Fatalf("/d/f by path: %+v %v", fi, err)
	}
	if _, err := clientx.At(clientx.Auto(cl, clientx.Durable)).CreateAt(ctx, d.Ino, "f", client.CreateOptions{}); !errors.Is(err, client.ErrExists) {
		t.Fatalf("create over an existing name: %v, want ErrExists", err)
	}
	if st, _ := cl.FsStat(ctx); st.OpenTxns != 0 {
		t.Fatalf("a failed compound request left %d transactions open", st.OpenTxns)
	}
	if _, err := clientx.At(clientx.Auto(cl, clientx.Async)).LinkAt(ctx, f.Ino, e.Ino, "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := clientx.At(clientx.Auto(cl, clientx.Async)).SymlinkAt(ctx, "../d/f", e.Ino, "s"); err != nil {
		t.Fatal(err)
	}
	tx := cl.Begin()
	if fi, err := clientx.At(tx).LookupAt(ctx, e.Ino, "g"); err != nil || fi.Ino != f.Ino || fi.Nlink != 2 {
		t.Fatalf("link: %+v %v", fi, err)
	}
	if fi, err := clientx.At(tx).LookupAt(ctx, e.Ino, "s"); err != nil || fi.Type != client.TypeSymlink || fi.Target != "../d/f" {
		t.Fatalf("symlink (not followed): %+v %v", fi, err)
	}
	tx.Abort(ctx)
	// Rename without replacing, then over an existing name.
	err = clientx.At(clientx.Auto(cl, clientx.Durable)).RenameAt(ctx, e.Ino, "g", d.Ino, "f", clientx.RenameOptions{NoReplace: true})
	if !errors.Is(err, client.ErrExists) {
		t.Fatalf("rename onto an existing name with NoReplace: %v, want ErrExists", err)
	}
	if err := clientx.At(clientx.Auto(cl, clientx.Durable)).RenameAt(ctx, e.Ino, "s", d.Ino, "f", clientx.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	// The path of an inode follows a rename of its ancestor.
	if err := clientx.At(clientx.Auto(cl, clientx.Durable)).RenameAt(ctx, 1, "d", 1, "renamed", clientx.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	tx = cl.Begin()
	defer tx.Abort(ctx)
	if p, err := clientx.At(tx).PathOf(ctx, e.Ino); err != nil || p != "/renamed/e" {
		t.Fatalf("path of e: %q %v", p, err)
	}
	if p, err := clientx.At(tx).PathOf(ctx, f.Ino); err != nil || p != "/renamed/e/g" {
		t.Fatalf("path of the file (its only name left): %q %v", p, err)
	}
	if err := clientx.At(clientx.Auto(cl, clientx.Durable)).RmdirAt(ctx, d.Ino, "e"); !errors.Is(err, client.ErrNotEmpty) {
		t.Fatalf("rmdir of a non-empty directory: %v", err)
	}
	if err := clientx.At(clientx.Auto(cl, clientx.Durable)).UnlinkAt(ctx, e.Ino, "g"); err != nil {
		t.Fatal(err)
	}
	if err := clientx.At(clientx.Auto(cl, clientx.Durable)).RmdirAt(ctx, d.Ino, "e"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Lookup(ctx, "/renamed/e"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("/renamed/e after rmdir: %v", err)
	}
}

// TestReadDirPages: a directory read by inode in small pages, cookie by
// cookie, lists every entry once, with attributes.
func TestReadDirPages(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	d, err := clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(ctx, 1, "many", 0)
	if err != nil {
		t.Fatal(err)
	}
	tx := cl.Begin()
	for i := 0; i < 250; i++ {
		if _, err := clientx.At(tx).MkdirAt(ctx, d.Ino, fmt.Sprintf("n%03d", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.CommitAsync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	rtx := cl.Begin()
	defer rtx.Abort(ctx)
	var names []string
	after := ""
	for pages := 0; ; pages++ {
		ents, more, err := clientx.At(rtx).ReadDirPage(ctx, d.Ino, after, 64, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Info.Ino != e.Ino || !e.Info.IsDir() {
				t.Fatalf("entry %s without its attributes: %+v", e.Name, e.Info)
			}
			names = append(names, e.Name)
		}
		if !more {
			break
		}
		after = ents[len(ents)-1].Name
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if len(names) != 250 || names[0] != "n000" || names[249] != "n249" {
		t.Fatalf("%d names listed (%v … %v)", len(names), names[:1], names[len(names)-1:])
	}
}

// TestAsyncCommitsSurviveNamenodeCrash: async commits are visible to other
// clients at once, and a kill -9 of the namenode (its page cache intact)
// loses none that was acknowledged.
func TestAsyncCommitsSurviveNamenodeCrash(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-sync-interval", "1h", "-sync-commits", "1000000"}})
	w := c.Client(client.Config{})
	r := c.Client(client.Config{})
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		name := fmt.Sprintf("a%03d", i)
		if _, err := clientx.At(clientx.Auto(w, clientx.Async)).MkdirAt(ctx, 1, name, 0); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			if _, err := r.Lookup(ctx, "/"+name); err != nil {
				t.Fatalf("async commit not visible to another client: %v", err)
			}
		}
	}
	w.Close()
	r.Close()
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(2)
	cl := c.Client(client.Config{})
	defer cl.Close()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	ents, err := tx.ReadDir(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 300 {
		t.Fatalf("%d of 300 acknowledged async commits after kill -9 of the namenode", len(ents))
	}
}
