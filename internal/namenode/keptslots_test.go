package namenode

import (
	"testing"

	"github.com/plasmafs/plasma/internal/wire"
)

func slotRun(state, start uint64, count uint32) wire.Extent {
	return wire.Extent{Index: state, Count: count, Replicas: []wire.Run{{Start: start}}}
}

// TestKeptSlotsGoToWholeBlocks: slots a datanode reports kept go to whole
// blocks first (from the file's hint when it is one), not to small blocks
// while the free bytes that are not kept suffice, then to any block; a
// kept slot allocated and handed back unwritten stays kept.
func TestKeptSlotsGoToWholeBlocks(t *testing.T) {
	dn := sparseNode(8 * spaceBS)
	whole := func(k uint64) uint64 { return k * spaceBS }
	page := func(k uint64) uint64 { return k * 4096 }
	dn.reconcileSlots([]wire.Extent{slotRun(wire.SlotKept, 100, 4)})
	if got := dn.keptFreeBytes(spaceBS); got != 4*spaceBS {
		t.Fatalf("kept bytes %d, want 4 MiB", got)
	}
	if s, n := dn.alloc(1, 0, page); n != 1 || s == 100 {
		t.Fatalf("a small block took slot %d (kept slots 100-103, 4 MiB not kept free)", s)
	}
	s, n := dn.alloc(2, 102, whole)
	if s != 102 || n != 2 {
		t.Fatalf("2 whole blocks from hint 102: got %d+%d, want the kept slots 102+2", s, n)
	}
	dn.used.clear(s, n) // an allocation round undone
	if s, n := dn.alloc(8, 0, whole); s != 100 || n != 4 {
		t.Fatalf("whole blocks: got %d+%d, want the kept run 100+4", s, n)
	}
	if got := dn.keptFreeBytes(spaceBS); got != 0 {
		t.Fatalf("kept bytes free %d after allocating every kept slot", got)
	}
}

// TestKeptSlotsTakenWhenShort: once the bytes free but not kept do not
// hold a request, even a small block goes into a kept slot (whose pages
// the datanode punches past its data), instead of adding pages beyond the
// capacity.
func TestKeptSlotsTakenWhenShort(t *testing.T) {
	dn := sparseNode(8 * spaceBS)
	dn.info.UsedBytes = 6 * spaceBS
	dn.reconcileSlots([]wire.Extent{slotRun(wire.SlotKept, 40, 2)})
	page := func(k uint64) uint64 { return k * 4096 }
	if s, n := dn.alloc(1, 0, page); s != 40 || n != 1 {
		t.Fatalf("a page with 2 MiB free, all kept: got %d+%d, want kept slot 40", s, n)
	}
}

// TestRegistrationReleasesSlotsNoFileHolds: a datanode's registration
// reports slots holding pages; those free in the block map (no file or
// allocation holds them) are taken and queued for release, those in use
// are left alone.
func TestRegistrationReleasesSlotsNoFileHolds(t *testing.T) {
	dn := sparseNode(8 * spaceBS)
	dn.used.set(10, 2) // a file's blocks
	if k := dn.reconcileSlots([]wire.Extent{slotRun(wire.SlotHolds, 9, 5), slotRun(wire.SlotKept, 30, 1)}); k != 3 {
		t.Fatalf("%d slots taken for release, want 3 (9, 12, 13)", k)
	}
	for _, b := range []uint64{9, 10, 11, 12, 13} {
		if !dn.used.isUsed(b) {
			t.Errorf("slot %d free after the registration", b)
		}
	}
	var queued []run
	queued = append(queued, dn.space.release...)
	if len(queued) != 2 || queued[0].start != 9 || queued[0].count != 1 || queued[1].start != 12 || queued[1].count != 2 {
		t.Fatalf("queued for release: %+v, want 9+1 and 12+2", queued)
	}
	if dn.used.isUsed(30) || dn.keptFreeBytes(spaceBS) != spaceBS {
		t.Fatal("the kept slot is not free and kept")
	}
}
