package lease

import (
	"context"
	"errors"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/vfs"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestHostileLeaseRenameDuringGrant: a VFS (the NFS bridge's, or a mount
// through positive dentries the kernel revalidates without the directory
// lock) renames a file into directory d while the rename waits for
// another transaction's lock, and meanwhile gets the lease on d; once the
// rename has returned, the renamed name is found, never taken for
// missing under the lease.
func TestHostileLeaseRenameDuringGrant(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	var s, d client.FileInfo
	testkit.MustOK(t, "setup", admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		var err error
		if s, err = tx.Mkdir(ctx, "/s", 0o755); err != nil {
			return err
		}
		if d, err = tx.Mkdir(ctx, "/d", 0o755); err != nil {
			return err
		}
		_, err = tx.Create(ctx, "/s/a", client.CreateOptions{})
		return err
	}))
	mc := c.Client(client.Config{})
	defer mc.Close()
	v := vfs.New(mc, vfs.Options{TTL: -1})
	defer v.Close()
	// Another transaction holds s/a: the VFS's rename waits for it.
	blocker := admin.Begin()
	testkit.MustOK(t, "unlink s/a in the blocking transaction", blocker.Unlink(ctx, "/s/a"))
	renames := func() uint64 {
		st, err := clientx.NamenodeStats(ctx, admin)
		testkit.MustOK(t, "stats", err)
		return st.PerOp["rename"]
	}
	before := renames()
	done := make(chan error, 1)
	go func() { done <- v.Rename(ctx, s.Ino, "a", d.Ino, "b", 0) }()
	for renames() < before+2 { // the rename was tried and conflicted
	}
	// Meanwhile the VFS looks up missing names in d and gets its lease.
	for _, name := range []string{"x1", "x2"} {
		if _, err := v.Lookup(ctx, d.Ino, name); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("lookup d/%s: %v, want not found", name, err)
		}
	}
	testkit.MustOK(t, "abort the blocking transaction", blocker.Abort(ctx))
	testkit.MustOK(t, "rename s/a d/b", <-done)
	if _, err := v.Lookup(ctx, d.Ino, "b"); err != nil {
		t.Fatalf("lookup of d/b right after this VFS renamed s/a there: %v", err)
	}
}
