package smallfiles

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestFreedWholeBlocksReusedInPlace: a deleted 16 MiB file's whole blocks
// keep their pages on both sparse datanodes once released (the data
// files' pages stay, the entries say kept) while 'plasma df' shows nothing
// used; the next 16 MiB file is written into exactly those pages (the data
// files' allocated ranges do not change: no new extents, as on fixed
// slots), reads back byte-exact, and counts as used. Fails without kept
// pages (the release punches them: the pages go) or without the namenode
// handing kept slots to whole blocks (the new file takes other pages).
func TestFreedWholeBlocksReusedInPlace(t *testing.T) {
	const size = 16 << 20
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 1 << 20, Size: 64 << 20, Sparse: true})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()

	testkit.WriteFile(t, cl, "/a", testkit.SeededBytes(size, 1), 2)
	var before [][][2]int64
	for _, p := range c.DNs {
		v := readVolume(t, p.Dir)
		if v.layout != 3 || v.held != size || v.onDisk != size {
			t.Fatalf("volume %s after a 16 MiB file: layout %d, %d bytes held, %d on disk", p.Dir, v.layout, v.held, v.onDisk)
		}
		before = append(before, v.extents)
	}
	testkit.MustOK(t, "delete /a", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, "/a") }))
	awaitVolumes(t, c, "the deleted file's blocks released with their pages kept", func(v volumeSlots) bool {
		return v.held == 0 && v.kept == size
	})
	testkit.AwaitCond(t, 30*time.Second, "df to show nothing used", func() bool { return df(t, c).Used == 0 })
	for i, p := range c.DNs {
		if v := readVolume(t, p.Dir); !slices.Equal(v.extents, before[i]) || len(v.pastData) > 0 {
			t.Fatalf("volume %s: pages on disk %v after the release, %v before (past their entries: %v)", p.Dir, v.extents, before[i], v.pastData)
		}
	}

	b := testkit.SeededBytes(size, 2)
	testkit.WriteFile(t, cl, "/b", b, 2)
	for i, p := range c.DNs {
		v := readVolume(t, p.Dir)
		if v.held != size || v.kept != 0 || !slices.Equal(v.extents, before[i]) {
			t.Fatalf("volume %s after a new 16 MiB file: %d bytes held, %d kept, pages on disk %v; want the freed file's pages %v reused", p.Dir, v.held, v.kept, v.extents, before[i])
		}
	}
	if got := testkit.ReadFile(t, cl, "/b"); string(got) != string(b) {
		t.Fatalf("/b reads back as %d bytes, %d differ", len(got), testkit.CountDiff(got, b))
	}
	testkit.AwaitCond(t, 30*time.Second, "df to count the new file", func() bool { return df(t, c).Used == 2*size })
	testkit.FsckClean(t, cl)
}

// TestNearlyFullVolumeWritesOverKeptPages: two sparse datanodes of 16 MiB
// keep the pages of a deleted 12 MiB file (replication 2); 12 MiB of small
// files then fit (no ENOSPC: kept pages count as free) and read back
// byte-exact (from the data files directly and through the datanodes), and no volume's disk ever holds more than its capacity: once
// the free bytes that are not kept run short, blocks go into kept slots,
// whose pages past a block's data are punched (no slot has pages past its
// entry's, so the deleted file's bytes are gone from every slot reused).
// Fails if kept pages count as used (ENOSPC) or if the namenode does not
// hand out kept slots when short (the disk holds the kept and the new
// pages: 24 MiB of 16).
func TestNearlyFullVolumeWritesOverKeptPages(t *testing.T) {
	const capacity, big = 16 << 20, 12 << 20
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 1 << 20, Size: capacity, Sparse: true})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	testkit.WriteFile(t, cl, "/big", testkit.SeededBytes(big, 7), 2)
	testkit.MustOK(t, "delete /big", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, "/big") }))
	awaitVolumes(t, c, "the deleted file's pages kept", func(v volumeSlots) bool { return v.held == 0 && v.kept == big })
	testkit.AwaitCond(t, 30*time.Second, "df to show nothing used", func() bool { return df(t, c).Used == 0 })

	tr := newTree("/t", 3000, 100, 8)
	pages := tr.upTo(big)
	if n, err := tr.write(ctx, cl, 2, 2, 10); err != nil {
		t.Fatalf("%d bytes of small files (in pages) on volumes of %d keeping %d of a deleted file: after %d files: %v", pages, capacity, big, n, err)
	}
	tr.check(t, ctx, cl, 2) // short-circuit: the volumes' data files read directly
	remote := c.Client(client.Config{NoShortCircuit: true})
	defer remote.Close()
	tr.check(t, ctx, remote, 2) // through the datanodes
	for _, p := range c.DNs {
		v := readVolume(t, p.Dir)
		if v.held+v.kept > capacity || v.onDisk > capacity || len(v.pastData) > 0 {
			t.Errorf("volume %s of %d bytes: %d held, %d kept, %d on disk; pages past their entries: %v", p.Dir, capacity, v.held, v.kept, v.onDisk, v.pastData)
		}
		if v.held < pages {
			t.Errorf("volume %s holds %d bytes, less than the tree's %d", p.Dir, v.held, pages)
		}
	}
	testkit.FsckClean(t, cl)
}

// awaitVolumes waits until every datanode's volume satisfies cond.
func awaitVolumes(t *testing.T, c *clustertest.Procs, what string, cond func(volumeSlots) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var state []string
		ok := true
		for _, p := range c.DNs {
			v := readVolume(t, p.Dir)
			state = append(state, fmt.Sprintf("%s: %d held, %d kept, %d on disk", p.Dir, v.held, v.kept, v.onDisk))
			ok = ok && cond(v)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s, not yet %s: %v", what, state)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, not timing
	}
}
