package namenode

import (
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

const spaceBS = 1 << 20

func sparseNode(capacity uint64) *dnode {
	dn := &dnode{Datanode: meta.Datanode{ID: 1, Identity: "a", Blocks: capacity / 4096}, used: newBlockMap(capacity / 4096)}
	dn.info = wire.NodeInfo{Identity: "a", Blocksize: spaceBS, Capacity: capacity}
	return dn
}

// TestCommittedBytesArePages: what blocks hold is the file's bytes in
// them, in whole pages.
func TestCommittedBytesArePages(t *testing.T) {
	for _, c := range []struct {
		size         int64
		index, count uint64
		want         uint64
	}{
		{1, 0, 1, 4096}, {4096, 0, 1, 4096}, {4097, 0, 1, 8192}, {0, 0, 1, 0},
		{3*spaceBS + 10, 0, 4, 3*spaceBS + 4096}, {3*spaceBS + 10, 3, 1, 4096}, {3*spaceBS + 10, 4, 1, 0},
		{5 * spaceBS, 1, 2, 2 * spaceBS},
	} {
		if got := committedBytes(c.size, c.index, c.count, spaceBS); got != c.want {
			t.Errorf("committedBytes(%d, %d, %d) = %d, want %d", c.size, c.index, c.count, got, c.want)
		}
	}
}

// TestSparseNodeRoomIsBytes: a sparse datanode takes blocks while their
// bytes fit, whatever its free slots, and counts what it reported, what
// is reserved and what settles.
func TestSparseNodeRoomIsBytes(t *testing.T) {
	dn := sparseNode(8 * spaceBS)
	page := func(k uint64) uint64 { return k * 4096 }
	whole := func(k uint64) uint64 { return k * spaceBS }
	if _, n := dn.alloc(10, 0, whole); n != 8 {
		t.Fatalf("10 whole blocks on 8 MiB: got %d, want 8", n)
	}
	dn.space.reserved = 8 * spaceBS
	if _, n := dn.alloc(1, 0, page); n != 0 {
		t.Fatalf("a page on a datanode whose bytes are all reserved: got %d blocks", n)
	}
	dn.unreserve(8, spaceBS, 3*spaceBS) // committed 3 MiB
	if _, n := dn.alloc(6, 0, whole); n != 5 {
		t.Fatalf("after 3 MiB settled: %d whole blocks fit, want 5", n)
	}
	// Two heartbeats later the report counts them, settling does not.
	dn.heartbeat(&wire.NodeInfo{Capacity: 8 * spaceBS, UsedBytes: 3 * spaceBS}, 0, nil)
	if got := dn.usedBytes(spaceBS); got != 6*spaceBS {
		t.Fatalf("after one heartbeat: %d used, want the report and what settles (6 MiB)", got)
	}
	dn.heartbeat(&wire.NodeInfo{Capacity: 8 * spaceBS, UsedBytes: 3 * spaceBS}, 0, nil)
	if got := dn.usedBytes(spaceBS); got != 3*spaceBS {
		t.Fatalf("after two heartbeats: %d used, want the report (3 MiB)", got)
	}
}

// TestFreedSlotsWaitForTheirRelease: freed slots of a sparse datanode stay
// taken until the datanode acknowledges the batch that released them; a
// batch is sent again until then (also after a new registration), and
// large frees go in bounded batches.
func TestFreedSlotsWaitForTheirRelease(t *testing.T) {
	dn := sparseNode(1 << 40)
	dn.used.set(0, 5000)
	dn.freeSlots(0, 5000)
	dn.freeSlots(10, 20) // freed twice: released once
	if len(dn.space.release) != 1 {
		t.Fatalf("release list %+v, want blocks 0+5000 once", dn.space.release)
	}
	if dn.used.nused != 5000 {
		t.Fatalf("freed slots free before their release: %d used", dn.used.nused)
	}
	hb := &wire.NodeInfo{Capacity: 1 << 40}
	xs := dn.heartbeat(hb, 0, nil)
	if len(xs) != 1 || xs[0].Count != maxReleaseBlocks || xs[0].Replicas[0].Start != 0 {
		t.Fatalf("first batch %+v, want blocks 0+%d", xs, maxReleaseBlocks)
	}
	seq := xs[0].Index
	if again := dn.heartbeat(hb, 0, nil); len(again) != 1 || again[0].Index != seq {
		t.Fatalf("unacknowledged batch not sent again: %+v", again)
	}
	// The datanode registers again: it may not have released the batch,
	// which goes again under a new number; the old one acknowledges
	// nothing.
	dn.readmitted()
	xs = dn.heartbeat(hb, seq, nil)
	if dn.used.nused != 5000 || len(xs) != 1 || xs[0].Index == seq || xs[0].Replicas[0].Start != 0 {
		t.Fatalf("after a new registration: %d used, batch %+v (old number %d)", dn.used.nused, xs, seq)
	}
	xs = dn.heartbeat(hb, xs[0].Index, nil)
	if dn.used.nused != 5000-maxReleaseBlocks {
		t.Fatalf("after the acknowledgement: %d used, want %d", dn.used.nused, 5000-maxReleaseBlocks)
	}
	if len(xs) != 1 || xs[0].Replicas[0].Start != maxReleaseBlocks || xs[0].Count != 5000-maxReleaseBlocks {
		t.Fatalf("second batch %+v", xs)
	}
	dn.heartbeat(hb, xs[0].Index, nil)
	if dn.used.nused != 0 {
		t.Fatalf("%d slots used after both batches were acknowledged", dn.used.nused)
	}
}
