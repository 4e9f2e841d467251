package vfs

import (
	"context"
	"testing"

	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestDirNamesBounded: a mount that has leased as many directories as it
// may, whose leases have all ended, still leases the next directory (the
// ended ones are swept); refusals are swept likewise.
func TestDirNamesBounded(t *testing.T) {
	ip := clustertest.StartInProcess(t, clustertest.Options{})
	c := ip.Client(t)
	ctx := context.Background()
	d, err := clientx.At(clientx.Auto(c, clientx.Async)).MkdirAt(ctx, RootIno, "d", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	n := newDirNames(c)
	for i := 0; i < maxLeasedDirs; i++ {
		// Ended leases (the zero lease expired long ago).
		n.dirs[uint64(1<<40+i)] = &leasedDir{names: map[string]struct{}{}}
	}
	for i := 0; i < 4*maxLeasedDirs; i++ {
		n.refused[uint64(1<<41+i)] = n.dirs[uint64(1<<40)].lease.Expires
	}
	for range leaseAfterMisses {
		n.missed(ctx, d.Ino)
	}
	if _, ok := n.absent(ctx, d.Ino, "anything"); !ok {
		t.Fatalf("no lease on a new directory with %d ended leases held (%d left)", maxLeasedDirs, len(n.dirs))
	}
	if len(n.dirs) != 1 {
		t.Fatalf("%d directories held, want only the new one", len(n.dirs))
	}
	if len(n.refused) != 0 {
		t.Fatalf("%d ended refusals kept", len(n.refused))
	}
}
