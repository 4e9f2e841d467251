package namenode

import (
	"math/bits"

	"github.com/plasmafs/plasma/internal/wire"
)

// Slots keeping pages on sparse datanodes (datanode/keep.go).
//
// A sparse datanode releasing a freed whole block keeps its pages on disk
// under an empty entry, so that the slot's next block overwrites them as on
// a fixed volume instead of making the filesystem allocate new extents.
// It says which slots it kept when it acknowledges a release batch, and
// which slots hold pages at all when it registers. Here those become
// nodeSpace.kept, and the allocator hands kept slots that are free to
// whole blocks first (dnode.alloc); to any block once the free bytes that
// are not kept run short, so the datanode's disk stays within its capacity
// (a block written into a kept slot takes no more than the pages it
// replaces: the datanode punches what it does not cover). Kept bytes count
// as free everywhere else (df, fsstat, admission).
//
// A kept bit outlives the slot's allocation: the slot may be handed back
// unwritten (a failed allocation round), and a written one is not counted
// (only free slots are); the bit is cleared when the slot is released
// again, and set again if the datanode keeps it then.
//
// Registration also ends leaks: a slot that holds pages on the datanode
// while no file holds it here (a transaction a crash of the namenode ended
// after its blocks were written, a release batch not sent before the
// namenode stopped) is taken and released like a freed one. Only slots
// free in the block map are taken, so no owner's block is ever released.

// keptMap returns the datanode's map of kept slots, made empty if its
// size no longer matches the block map's.
func (d *dnode) keptMap() *blockMap {
	if k := d.space.kept; k != nil && k.size == d.used.size {
		return k
	}
	d.space.kept = newBlockMap(d.used.size)
	return d.space.kept
}

// noteKept marks the slots of xs (one-replica extents of state
// wire.SlotKept) as keeping pages.
func (d *dnode) noteKept(xs []wire.Extent) {
	for _, x := range xs {
		if x.Index != wire.SlotKept || len(x.Replicas) == 0 {
			continue
		}
		k := d.keptMap()
		if s := x.Replicas[0].Start; s < k.size && uint64(x.Count) <= k.size-s {
			k.set(s, uint64(x.Count))
		}
	}
}

// keptFreeBytes is what the free slots keeping pages hold (counted as
// whole blocks).
func (d *dnode) keptFreeBytes(bs uint64) uint64 {
	k := d.space.kept
	if k == nil || k.nused == 0 || k.size != d.used.size {
		return 0
	}
	c := 0
	for i, w := range k.used {
		c += bits.OnesCount64(w &^ d.used.used[i])
	}
	return uint64(c) * bs
}

// allocKept takes up to want contiguous free slots keeping pages, from
// hint if it is one, else the first; n == 0 if there are none.
func (d *dnode) allocKept(want, hint uint64) (start, n uint64) {
	k := d.space.kept
	if k == nil || k.nused == 0 || k.size != d.used.size || want == 0 {
		return 0, 0
	}
	free := func(b uint64) bool { return b < k.size && k.isUsed(b) && !d.used.isUsed(b) }
	start = hint
	if !free(hint) {
		start = k.size
		for i, w := range k.used {
			if f := w &^ d.used.used[i]; f != 0 {
				start = uint64(i)*64 + uint64(bits.TrailingZeros64(f))
				break
			}
		}
		if start >= k.size {
			return 0, 0
		}
	}
	for n < want && free(start+n) {
		n++
	}
	d.used.set(start, n)
	return start, n
}

// reconcileSlots takes a sparse datanode's registration report of its
// slots holding pages (one-replica extents, Index wire.SlotHolds or
// wire.SlotKept): the kept ones become its kept map, and those holding a
// block that are free in the block map are taken and queued for release.
// It returns how many were.
func (d *dnode) reconcileSlots(xs []wire.Extent) uint64 {
	if !d.sparse() {
		return 0
	}
	d.space.kept = nil
	d.noteKept(xs)
	var orphans uint64
	for _, x := range xs {
		if x.Index != wire.SlotHolds || len(x.Replicas) == 0 {
			continue
		}
		s, end := x.Replicas[0].Start, x.Replicas[0].Start+uint64(x.Count)
		for b := s; b < end && b < d.used.size; {
			if d.used.isUsed(b) {
				b++
				continue
			}
			n := uint64(1)
			for b+n < end && b+n < d.used.size && !d.used.isUsed(b+n) {
				n++
			}
			d.used.set(b, n)
			d.freeSlots(b, n)
			orphans += n
			b += n
		}
	}
	return orphans
}
