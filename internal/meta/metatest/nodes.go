package metatest

import (
	"reflect"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
)

// drainsAndRemovals: a datanode's drain mark survives a reopen and is
// cleared again; a datanode removed is gone from the datanodes and
// listed as removed; writing a datanode keeps its drain mark; replaying
// the same changes leaves the store as it is.
func drainsAndRemovals(t *testing.T, e Engine) {
	s := e.New(t)
	nodes := []meta.Datanode{{ID: 1, Identity: "a", Blocks: 1000, Enabled: true}, {ID: 2, Identity: "b", Blocks: 500, Enabled: true},
		{ID: 3, Identity: "c", Blocks: 500, Enabled: true}}
	apply(t, s, &meta.Change{PutNodes: nodes})
	drain := &meta.Change{PutNodes: []meta.Datanode{{ID: 2, Identity: "b", Blocks: 500}}, Drains: map[uint32]bool{2: true, 3: true}}
	apply(t, s, drain, &meta.Change{Drains: map[uint32]bool{3: false}})
	// A registration that grew the volume rewrites its record: the drain
	// mark stays.
	apply(t, s, &meta.Change{PutNodes: []meta.Datanode{{ID: 2, Identity: "b", Blocks: 600}}})
	s = e.Reopen(t, s)
	snap := load(t, s)
	if !reflect.DeepEqual(snap.Draining, []uint32{2}) {
		t.Fatalf("draining %v after reopen, want [2]", snap.Draining)
	}
	remove := &meta.Change{RemoveNodes: []meta.RemovedDatanode{{ID: 2, Identity: "b"}}}
	apply(t, s, remove)
	apply(t, s, remove) // a replay
	s = e.Reopen(t, s)
	defer s.Close()
	snap = load(t, s)
	if len(snap.Datanodes) != 2 || len(snap.Draining) != 0 {
		t.Fatalf("after removing datanode 2: datanodes %+v, draining %v", snap.Datanodes, snap.Draining)
	}
	if !reflect.DeepEqual(snap.Removed, []meta.RemovedDatanode{{ID: 2, Identity: "b"}}) {
		t.Fatalf("removed %+v, want datanode 2", snap.Removed)
	}
}
