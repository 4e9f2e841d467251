package namenode

import (
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
)

func TestNodeRegistryIDsAndReservations(t *testing.T) {
	r := newNodeRegistry()
	if id := r.nextID(); id != 1 {
		t.Fatalf("first id %d, want 1", id)
	}
	r.add(meta.Datanode{ID: 3, Identity: "x", Blocks: 10, Enabled: true})
	if id := r.nextID(); id != 4 {
		t.Fatalf("id after 3: %d, want 4", id)
	}
	// An id reserved by a registration in flight is not handed out again.
	if !r.reserve("y", r.nextID()) {
		t.Fatal("reserve y refused")
	}
	if id := r.nextID(); id != 5 {
		t.Fatalf("id with 4 reserved: %d, want 5", id)
	}
	if r.reserve("y", 9) || !r.reserved("y") {
		t.Fatal("second registration of y accepted")
	}
	r.unreserve("y")
	if r.reserved("y") || r.nextID() != 4 {
		t.Fatalf("after unreserve: reserved %v, next %d", r.reserved("y"), r.nextID())
	}
	if r.get(3) != r.lookup("x") || r.get(3) == nil || r.lookup("y") != nil || r.get(4) != nil {
		t.Fatal("lookups by id and identity disagree")
	}
}

func TestNodeRegistryLivenessAndList(t *testing.T) {
	r := newNodeRegistry()
	a := r.add(meta.Datanode{ID: 2, Identity: "a", Blocks: 10, Enabled: true})
	b := r.add(meta.Datanode{ID: 1, Identity: "b", Blocks: 20, Enabled: true})
	d := r.add(meta.Datanode{ID: 3, Identity: "d", Blocks: 30, Enabled: false})
	if len(r.live()) != 0 {
		t.Fatal("recorded datanodes are live before being admitted")
	}
	c1, c2 := &conn{}, &conn{}
	a.alive, a.conn = true, c1
	b.alive, b.conn = true, c2
	d.alive, d.conn = true, c1
	if live := r.live(); len(live) != 2 || (live[0] != a && live[1] != a) {
		t.Fatalf("live = %v, want a and b (d is disabled)", live)
	}
	b.used.set(0, 5)
	l := r.list()
	if len(l) != 3 || l[0].ID != 1 || l[1].ID != 2 || l[2].ID != 3 {
		t.Fatalf("list not by id: %+v", l)
	}
	if !l[0].Alive || l[0].Used != 5 || l[0].Blocks != 20 || l[2].Enabled {
		t.Fatalf("list entries wrong: %+v", l)
	}
	gone := r.disconnect(c1)
	if len(gone) != 2 || a.alive || d.alive || a.conn != nil || !b.alive {
		t.Fatalf("disconnect of c1: gone %d, a %v d %v b %v", len(gone), a.alive, d.alive, b.alive)
	}
	if live := r.live(); len(live) != 1 || live[0] != b {
		t.Fatalf("live after disconnect = %v", live)
	}
	n := 0
	for range r.all() {
		n++
	}
	if n != 3 || r.count() != 3 {
		t.Fatalf("all yielded %d, count %d", n, r.count())
	}
}
