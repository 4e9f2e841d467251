package vfs

import (
	"context"
	"os"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestInvalidationKeepsOtherInodesFetches: attributes fetched while another
// inode was invalidated (a concurrent unlink, create or commit in this
// mount) are cached and answered as they are; only a fetch across an
// invalidation of its own inode is not trusted. Before, any invalidation
// sent every concurrent lookup to the namenode a second time.
func TestInvalidationKeepsOtherInodesFetches(t *testing.T) {
	ip := clustertest.StartInProcess(t, clustertest.Options{})
	v := New(ip.Client(t), Options{})
	defer v.Close()
	ctx := context.Background()
	var inos []uint64
	for _, name := range []string{"a", "b"} {
		a, fh, err := v.Create(ctx, RootIno, name, 0o644, os.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		v.Release(ctx, fh)
		inos = append(inos, a.Ino)
	}
	a, b := inos[0], inos[1]
	attrA, err := v.GetAttr(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	v.invalidate(a)

	// A fetch of a that b's invalidation crossed.
	epoch := v.attrEpoch()
	v.invalidate(b)
	if v.changedSince(a, epoch) {
		t.Fatal("an invalidation of another inode counts as one of a")
	}
	v.putAttrSince(attrA, epoch, true)
	if _, ok := v.cachedAttr(a); !ok {
		t.Fatal("attributes fetched across another inode's invalidation were not cached")
	}

	// A fetch of a that a's own invalidation crossed, also after another
	// fetch of a was cached since.
	epoch = v.attrEpoch()
	v.invalidate(a)
	v.putAttrSince(attrA, v.attrEpoch(), true)
	if !v.changedSince(a, epoch) {
		t.Fatal("an invalidation of a does not count")
	}
	v.invalidate(a)
	v.putAttrSince(attrA, epoch, true)
	if _, ok := v.cachedAttr(a); ok {
		t.Fatal("attributes fetched across their inode's invalidation were cached")
	}
}
