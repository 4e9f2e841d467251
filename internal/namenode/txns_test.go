package namenode

import (
	"testing"
)

func TestTxnTableBeginEndAndLimit(t *testing.T) {
	tt := newTxnTable()
	c := &conn{}
	a, err := tt.begin(c, 1, 5, "ann", 2)
	if err != nil {
		t.Fatal(err)
	}
	if tt.get(c, 1) != a || !tt.open(a) || a.user != "ann" || a.start != 5 || a.tag&1 == 0 {
		t.Fatalf("begun transaction not found or wrong: %+v", a)
	}
	if tt.get(&conn{}, 1) != nil {
		t.Fatal("transaction ids are per connection, found one on another")
	}
	b, err := tt.begin(c, 2, 7, "bob", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tt.begin(c, 3, 7, "bob", 2); err == nil {
		t.Fatalf("third transaction over a limit of 2: %v", err)
	}
	if c.ntxns != 2 || tt.count() != 2 {
		t.Fatalf("ntxns %d count %d, want 2", c.ntxns, tt.count())
	}
	if got := tt.oldestStart(100); got != 5 {
		t.Fatalf("oldest start %d, want 5", got)
	}
	tt.charge(a, 10)
	tt.charge(b, 3)
	tt.charge(a, 1)
	if tt.held("ann") != 11 || tt.held("bob") != 3 {
		t.Fatalf("held ann %d bob %d", tt.held("ann"), tt.held("bob"))
	}
	tt.end(a)
	if tt.open(a) || tt.get(c, 1) != nil || tt.held("ann") != 0 || c.ntxns != 1 {
		t.Fatalf("after end: open %v held %d ntxns %d", tt.open(a), tt.held("ann"), c.ntxns)
	}
	if got := tt.oldestStart(100); got != 7 {
		t.Fatalf("oldest start %d, want 7", got)
	}
	// Ending during iteration is allowed (the reaper does).
	for _, tx := range tt.all() {
		tt.end(tx)
	}
	if tt.count() != 0 || len(tt.userAlloc) != 0 || c.ntxns != 0 || tt.oldestStart(100) != 100 {
		t.Fatalf("after ending all: count %d, charges %v, ntxns %d", tt.count(), tt.userAlloc, c.ntxns)
	}
	if _, err := tt.begin(c, 3, 9, "", 2); err != nil {
		t.Fatalf("begin after the others ended: %v", err)
	}
}
