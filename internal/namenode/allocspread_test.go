package namenode

import "testing"

// TestSingleReplicaFilesSpreadByFreeSpace: new single-replica files go to
// the datanode with the most free blocks, near-equals taking turns; a
// file written in several allocations stays on its datanode, contiguous.
func TestSingleReplicaFilesSpreadByFreeSpace(t *testing.T) {
	nodes := testNodes(1000, 1000)
	var turn uint64
	perNode := map[uint32]int{}
	for ino := uint64(1); ino <= 40; ino++ {
		a := newBlockAllocator(nodes, nil)
		a.turn = &turn
		xs, _, err := a.place(ino, 0, 3, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(xs) != 1 {
			t.Fatalf("file %d: %+v, want one run", ino, xs)
		}
		perNode[xs[0].Replicas[0].Node] += int(xs[0].Count)
	}
	if perNode[1] != 60 || perNode[2] != 60 {
		t.Fatalf("blocks per datanode %v, want 60 each", perNode)
	}

	// A datanode with much more room takes the new files until it is
	// near the others.
	nodes = testNodes(1000, 1000)
	nodes[0].used.set(0, 700)
	for ino := uint64(1); ino <= 20; ino++ {
		a := newBlockAllocator(nodes, nil)
		a.turn = &turn
		xs, _, err := a.place(ino, 0, 10, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if xs[0].Replicas[0].Node != 2 {
			t.Fatalf("file %d went to datanode %d, which has %d free blocks against %d", ino, xs[0].Replicas[0].Node, nodes[0].used.free(), nodes[1].used.free())
		}
	}

	// A file allocated in two requests of one transaction: the second
	// joins the first's run (pending, not attached yet).
	nodes = testNodes(1000, 1000)
	a := newBlockAllocator(nodes, nil)
	a.turn = &turn
	first, runs, err := a.place(9, 0, 2, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // other files meanwhile
		b := newBlockAllocator(nodes, nil)
		b.turn = &turn
		if _, _, err := b.place(uint64(100+i), 0, 1, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	f := first[0].Replicas[0]
	free := !nodes[f.Node-1].used.isUsed(f.Start + 2)
	b := newBlockAllocator(nodes, nil)
	b.turn = &turn
	b.notePending(runs)
	second, _, err := b.place(9, 2, 2, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := second[0].Replicas[0]
	if s.Node != f.Node {
		t.Fatalf("the file's second allocation went to datanode %d, its first to %d", s.Node, f.Node)
	}
	if free && s.Start != f.Start+2 {
		t.Fatalf("second allocation at %d, not after the first (%d+2), which was free", s.Start, f.Start)
	}
}

// TestReplicatedFileStaysOnItsDatanodes: a file with two replicas written
// in several allocations keeps a group's blocks on the datanodes its first
// allocation chose, though others have more room since; a new file goes
// to the roomiest.
func TestReplicatedFileStaysOnItsDatanodes(t *testing.T) {
	nodes := testNodes(1000, 1000, 1000)
	a := newBlockAllocator(nodes, nil)
	first, runs, err := a.place(5, 0, 4, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	chosen := map[uint32]bool{}
	for _, r := range first[0].Replicas {
		chosen[r.Node] = true
	}
	// Another file meanwhile: the datanodes' order by free blocks
	// changes.
	b := newBlockAllocator(nodes, nil)
	if _, _, err := b.place(6, 0, 50, 2, nil); err != nil {
		t.Fatal(err)
	}
	c := newBlockAllocator(nodes, nil)
	c.notePending(runs)
	second, _, err := c.place(5, 4, 4, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range second[0].Replicas {
		if !chosen[r.Node] {
			t.Fatalf("the file's second allocation went to %+v, its first to %+v", second[0].Replicas, first[0].Replicas)
		}
	}
	most := nodes[0]
	for _, dn := range nodes {
		if dn.used.free() > most.used.free() {
			most = dn
		}
	}
	d := newBlockAllocator(nodes, nil)
	third, _, err := d.place(7, 0, 1, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if third[0].Replicas[0].Node != most.ID && third[0].Replicas[1].Node != most.ID {
		t.Fatalf("a new file went to %+v, not to the roomiest datanode %d", third[0].Replicas, most.ID)
	}
}
