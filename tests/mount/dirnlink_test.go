package mount

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestDirLinkCount: a directory's link count is 2 plus its
// subdirectories (POSIX; find and ls rely on it), after mkdir, rmdir,
// renames between directories and over an empty directory, through the
// API and through a mount, and again after the namenode restarts.
func TestDirLinkCount(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	do := func(fn func(tx *client.Txn) error) {
		t.Helper()
		if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return fn(tx) }); err != nil {
			t.Fatal(err)
		}
	}
	do(func(tx *client.Txn) error {
		for _, d := range []string{"/a", "/a/b", "/a/c", "/a/d", "/x", "/x/e"} {
			if _, err := tx.Mkdir(ctx, d, 0o755); err != nil {
				return err
			}
		}
		_, err := tx.CreateFile(ctx, "/a/file", client.CreateOptions{})
		return err
	})
	do(func(tx *client.Txn) error { return tx.Rmdir(ctx, "/a/b") })
	do(func(tx *client.Txn) error { return tx.Rename(ctx, "/a/c", "/x/c") })
	do(func(tx *client.Txn) error { return tx.Rename(ctx, "/a/d", "/x/e") }) // over an empty directory
	want := map[string]uint32{"/": 4, "/a": 2, "/x": 4}
	check := func(cl *client.Client, when string) {
		t.Helper()
		tx := cl.Begin()
		defer tx.Abort(ctx)
		for p, n := range want {
			fi, err := tx.Lstat(ctx, p)
			testkit.MustOK(t, "stat "+p, err)
			if fi.Nlink != n {
				t.Errorf("%s: %s has link count %d, want %d", when, p, fi.Nlink, n)
			}
		}
	}
	check(cl, "after the changes")
	m := testkit.StartMount(t, c)
	for p, n := range want {
		fi, err := os.Stat(m.Path(p))
		testkit.MustOK(t, "stat "+p, err)
		if got := fi.Sys().(*syscall.Stat_t).Nlink; got != uint64(n) {
			t.Errorf("through the mount: %s has link count %d, want %d", p, got, n)
		}
	}
	testkit.MustOK(t, "mkdir in the mount", os.Mkdir(m.Path("x/new"), 0o755))
	if fi, err := os.Stat(m.Path("x")); err != nil || fi.Sys().(*syscall.Stat_t).Nlink != 5 {
		t.Errorf("through the mount after mkdir x/new: %v %v, want link count 5", fi, err)
	}
	want["/x"] = 5
	cl.Close()
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(len(c.DNs))
	cl2 := c.Client(client.Config{})
	defer cl2.Close()
	check(cl2, "after a namenode restart")
}
