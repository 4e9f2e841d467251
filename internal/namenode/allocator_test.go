package namenode

import (
	"errors"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

func testNodes(sizes ...uint64) []*dnode {
	var out []*dnode
	for i, sz := range sizes {
		id := uint32(i + 1)
		out = append(out, &dnode{Datanode: meta.Datanode{ID: id, Identity: string(rune('a' + i)), Blocks: sz, Enabled: true}, used: newBlockMap(sz), alive: true})
	}
	return out
}

func usedTotal(nodes []*dnode) (n uint64) {
	for _, dn := range nodes {
		n += dn.used.nused
	}
	return n
}

func TestBlockAllocatorSingleReplicaRuns(t *testing.T) {
	nodes := testNodes(1000, 1000)
	a := newBlockAllocator(nodes, nil)
	xs, runs, err := a.place(7, 0, 300, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Runs of runLength blocks alternate between the nodes, by ID.
	want := []struct {
		index uint64
		count uint32
		node  uint32
	}{{0, 128, 1}, {128, 128, 2}, {256, 44, 1}}
	if len(xs) != len(want) || len(runs) != len(want) {
		t.Fatalf("extents %+v runs %+v", xs, runs)
	}
	for i, w := range want {
		x := xs[i]
		if x.Index != w.index || x.Count != w.count || len(x.Replicas) != 1 || x.Replicas[0].Node != w.node {
			t.Fatalf("extent %d = %+v, want %+v", i, x, w)
		}
		if r := runs[i]; r.node != w.node || r.count != uint64(w.count) || r.ino != 7 || r.index != w.index || r.start != x.Replicas[0].Start {
			t.Fatalf("run %d = %+v for extent %+v", i, r, x)
		}
	}
	// The third piece continues the first on node 1 (contiguity).
	if xs[2].Replicas[0].Start != xs[0].Replicas[0].Start+128 {
		t.Fatalf("node 1 runs not contiguous: %+v", xs)
	}
	if usedTotal(nodes) != 300 {
		t.Fatalf("%d blocks marked used, want 300", usedTotal(nodes))
	}
}

func TestBlockAllocatorReplicasPreferenceAndHints(t *testing.T) {
	nodes := testNodes(100, 100, 100)
	// The file already ends at block 40 of node c: a growing file stays contiguous there.
	prev := []wire.Extent{{Index: 0, Count: 10, Replicas: []wire.Run{{Node: 3, Start: 30}}}}
	nodes[2].used.set(30, 10)
	a := newBlockAllocator(nodes, prev)
	xs, _, err := a.place(1, 10, 5, 2, []string{"c", "-a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 1 || len(xs[0].Replicas) != 2 {
		t.Fatalf("extents %+v", xs)
	}
	r := xs[0].Replicas
	if r[0].Node != 3 || r[0].Start != 40 {
		t.Fatalf("preferred node c not first, or hint not followed: %+v", r)
	}
	if r[1].Node != 2 {
		t.Fatalf("excluded node a used, or b skipped: %+v", r)
	}
	if _, _, err := a.place(1, 0, 1, 3, []string{"-a"}); err == nil || !isCode(err, wire.ErrCodeUnavailable) {
		t.Fatalf("3 replicas on 2 usable nodes: %v, want unavailable", err)
	}
}

func TestBlockAllocatorFullNodeSubstitutedAndFailureGivesBack(t *testing.T) {
	nodes := testNodes(10, 50)
	a := newBlockAllocator(nodes, nil)
	// Node a is the single-replica target of group 0; it fills up and b takes the rest.
	xs, _, err := a.place(1, 0, 30, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 2 || xs[0].Replicas[0].Node != 1 || xs[0].Count != 10 || xs[1].Replicas[0].Node != 2 || xs[1].Count != 20 {
		t.Fatalf("extents %+v", xs)
	}
	before := usedTotal(nodes)
	// 40 more cannot fit (30 free on b, none on a): nothing stays taken.
	if _, runs, err := a.place(1, 30, 40, 1, nil); err == nil || !isCode(err, wire.ErrCodeNoSpace) || runs != nil {
		t.Fatalf("over-full allocation: runs %v, err %v, want no space", runs, err)
	}
	if got := usedTotal(nodes); got != before {
		t.Fatalf("failed allocation left %d blocks taken", got-before)
	}
}

func isCode(err error, code wire.Code) bool {
	var e *opError
	return errors.As(err, &e) && e.code == code
}
