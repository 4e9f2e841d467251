package vfs

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestListingFromBeforeAChangeIsNotCached: a directory listing (a scan)
// fetched before this mount removed a name or changed a file's
// attributes, arriving after, puts neither the removed name nor the old
// attributes into the cache.
func TestListingFromBeforeAChangeIsNotCached(t *testing.T) {
	ip := clustertest.StartInProcess(t, clustertest.Options{})
	c := ip.Client(t)
	v := New(c, Options{})
	defer v.Close()
	ctx := context.Background()
	d, err := v.Mkdir(ctx, RootIno, "d", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	inos := map[string]uint64{}
	for _, name := range []string{"a", "b"} {
		a, fh, err := v.Create(ctx, d.Ino, name, 0o644, os.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		v.Release(ctx, fh)
		inos[name] = a.Ino
	}
	list := func() []client.DirEntry {
		page, _, err := clientx.At(clientx.Auto(c, clientx.Async)).ReadDirPage(ctx, d.Ino, "", scanPage, true)
		if err != nil {
			t.Fatal(err)
		}
		return page
	}

	epoch := v.attrEpoch()
	page := list()
	if err := v.Unlink(ctx, d.Ino, "a"); err != nil {
		t.Fatal(err)
	}
	v.putListing(d.Ino, page, epoch)
	if _, ok := v.cachedEntry(d.Ino, "a"); ok {
		t.Error("a listing from before an unlink put the removed name back")
	}

	epoch = v.attrEpoch()
	page = list()
	mtime := time.Unix(1_000_000, 0)
	if _, err := v.SetAttr(ctx, inos["b"], SetAttrReq{Mtime: &mtime}); err != nil {
		t.Fatal(err)
	}
	v.putListing(d.Ino, page, epoch)
	if a, ok := v.cachedAttr(inos["b"]); ok && !a.Mtime.Equal(mtime) {
		t.Errorf("a listing from before a utime put back mtime %v", a.Mtime)
	}
}
