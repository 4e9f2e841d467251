package client_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// TestDirLease: a lease comes with the directory's listing and is renewed
// without one; nobody else gets it meanwhile; another client's create in
// the leased directory is answered only after the holder's lease has
// ended, and the directory is then not leased again for a while, nor is
// any directory to the holder; a directory another transaction is still
// changing is not leased.
func TestDirLease(t *testing.T) {
	ctx := context.Background()
	holder, other := connect(), connect()
	defer holder.Close()
	defer other.Close()
	base := fmt.Sprintf("/lease-%d", time.Now().UnixNano())
	var d, d2 client.FileInfo
	if err := holder.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		var err error
		if _, err = tx.Mkdir(ctx, base, 0o755); err != nil {
			return err
		}
		if d, err = tx.Mkdir(ctx, base+"/d", 0o755); err != nil {
			return err
		}
		if d2, err = tx.Mkdir(ctx, base+"/d2", 0o755); err != nil {
			return err
		}
		_, err = tx.Create(ctx, base+"/d/a", client.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	l, ok, err := clientx.LeaseDir(ctx, holder, d.Ino)
	if err != nil || !ok || !l.New || !slices.Equal(l.Names, []string{"a"}) {
		t.Fatalf("first lease: %+v ok=%v err=%v, want a new lease listing [a]", l, ok, err)
	}
	if l, ok, err = clientx.LeaseDir(ctx, holder, d.Ino); err != nil || !ok || l.New || len(l.Names) != 0 {
		t.Fatalf("renewal: %+v ok=%v err=%v, want the lease continued without a listing", l, ok, err)
	}
	if _, ok, err := clientx.LeaseDir(ctx, other, d.Ino); err != nil || ok {
		t.Fatalf("another client got the held lease (ok=%v err=%v)", ok, err)
	}
	// The holder's own creates go through.
	if _, err := clientx.At(clientx.Auto(holder, clientx.Async)).CreateAt(ctx, d.Ino, "b", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another client's create waits the lease out.
	if _, err := clientx.At(clientx.Auto(other, clientx.Async)).CreateAt(ctx, d.Ino, "c", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if clientx.LeaseValid(holder, l) {
		t.Fatalf("another client's create in %s was answered while the holder's lease (until %v) still ran", base+"/d", l.Expires)
	}
	for _, c := range []*client.Client{holder, other} {
		if _, ok, err := clientx.LeaseDir(ctx, c, d.Ino); err != nil || ok {
			t.Fatalf("directory leased again right after a client waited for it (ok=%v err=%v)", ok, err)
		}
	}
	if _, ok, err := clientx.LeaseDir(ctx, holder, d2.Ino); err != nil || ok {
		t.Fatalf("another directory leased to the holder right after a client waited for its lease (ok=%v err=%v)", ok, err)
	}
	// The rest with a client that made nobody wait.
	fresh := connect()
	defer fresh.Close()
	// A directory another transaction is adding to has names the
	// committed listing lacks: no lease until that transaction ends.
	tx := other.Begin()
	if _, err := clientx.At(tx).CreateAt(ctx, d2.Ino, "pending", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := clientx.LeaseDir(ctx, fresh, d2.Ino); err != nil || ok {
		t.Fatalf("lease granted while another transaction adds to the directory (ok=%v err=%v)", ok, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if l, ok, err := clientx.LeaseDir(ctx, fresh, d2.Ino); err != nil || !ok || !slices.Equal(l.Names, []string{"pending"}) {
		t.Fatalf("lease after the commit: %+v ok=%v err=%v", l, ok, err)
	}
	// Not a directory; missing.
	if _, _, err := clientx.LeaseDir(ctx, fresh, 1<<60); err == nil {
		t.Fatal("lease of a missing inode: no error")
	}
}
