package namenode

import (
	"slices"
	"testing"

	"github.com/plasmafs/plasma/internal/wire"
)

// withReplica attaches a copy only to the version it copied, splitting the
// extent around the copied blocks.
func TestWithReplica(t *testing.T) {
	x := wire.Extent{Index: 10, Count: 4, Gen: 7, CRC: []uint32{1, 2, 3, 4}, Replicas: []wire.Run{{Node: 1, Start: 100}}}
	task := &copyTask{index: 11, count: 2, crc: []uint32{2, 3}, gen: 7, src: wire.Run{Node: 1, Start: 101}, dst: wire.Run{Node: 2, Start: 500}}
	got, ok := withReplica([]wire.Extent{x}, task)
	if !ok || len(got) != 3 {
		t.Fatalf("withReplica: %v %+v", ok, got)
	}
	mid := got[1]
	if mid.Index != 11 || mid.Count != 2 || !slices.Equal(mid.CRC, []uint32{2, 3}) ||
		!slices.Equal(mid.Replicas, []wire.Run{{Node: 1, Start: 101}, {Node: 2, Start: 500}}) {
		t.Errorf("copied piece: %+v", mid)
	}
	if got[0].Count != 1 || got[2].Index != 13 || got[2].Replicas[0].Start != 103 {
		t.Errorf("pieces around it: %+v %+v", got[0], got[2])
	}
	for _, bad := range []func(*copyTask){
		func(t *copyTask) { t.gen = 8 },                                                         // another allocation
		func(t *copyTask) { t.crc = []uint32{2, 9} },                                            // another version
		func(t *copyTask) { t.src = wire.Run{Node: 3, Start: 101} },                             // the source replica gone
		func(t *copyTask) { t.dst = wire.Run{Node: 1, Start: 900} },                             // the destination holds one
		func(t *copyTask) { t.index, t.count, t.crc, t.src.Start = 13, 2, []uint32{4, 0}, 103 }, // past the extent
	} {
		c := *task
		bad(&c)
		if _, ok := withReplica([]wire.Extent{x}, &c); ok {
			t.Errorf("copy %+v attached to %+v", c, x)
		}
	}
}

// The queue is served most endangered first.
func TestQueueMostEndangeredFirst(t *testing.T) {
	rp := newReplicator(0, 1)
	rp.queue[5] = []repItem{{ino: 5, x: wire.Extent{Index: 0}, present: 2}}
	rp.queue[7] = []repItem{{ino: 7, x: wire.Extent{Index: 3}, present: 1}, {ino: 7, x: wire.Extent{Index: 0}, present: 1}}
	rp.queue[9] = []repItem{{ino: 9, x: wire.Extent{Index: 0}, present: 0}}
	var order []uint64
	for _, it := range rp.queued() {
		order = append(order, it.ino*10+it.x.Index)
	}
	if want := []uint64{90, 70, 73, 50}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
}
