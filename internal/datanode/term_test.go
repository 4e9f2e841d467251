package datanode

import (
	"errors"
	"testing"

	"github.com/plasmafs/plasma/internal/auth"
)

// The term only rises; a ticket that writes with a lower one is refused
// as outdated (a client asks for new tickets), a read ticket is not, and
// a ticket of a higher term raises it.
func TestGroupTermRefusesOlderWrites(t *testing.T) {
	var g groupTerm
	if err := g.checkWrite(&auth.Ticket{Write: true}); err != nil {
		t.Fatalf("term 0 (a single namenode): %v", err)
	}
	g.learn(5)
	g.learn(3)
	if got := g.current(); got != 5 {
		t.Fatalf("term %d after learning 5 then 3", got)
	}
	for _, tk := range []*auth.Ticket{{Write: true, Term: 4}, {Append: true, Term: 4}} {
		err := g.checkWrite(tk)
		if !errors.Is(err, auth.ErrTicketTermOutdated) || !errors.Is(err, auth.ErrTicketOutdated) {
			t.Fatalf("ticket of term 4 after term 5: %v", err)
		}
	}
	if err := g.checkWrite(&auth.Ticket{Term: 4}); err != nil {
		t.Fatalf("read ticket of term 4: %v", err)
	}
	if err := g.checkWrite(&auth.Ticket{Write: true, Term: 7}); err != nil || g.current() != 7 {
		t.Fatalf("ticket of term 7: %v, term %d", err, g.current())
	}
	if err := g.checkWrite(&auth.Ticket{Write: true, Term: 5}); err == nil {
		t.Fatal("ticket of term 5 accepted after one of term 7")
	}
}

// A read ticket of an older term reads blocks not written since, but not
// a block written under a later term; before the first registration
// every block counts as written under term 0, after it under the
// registration's term unless written later.
func TestGroupTermRefusesOlderReadsOfRewrittenBlocks(t *testing.T) {
	var g groupTerm
	g.registered(3)
	for _, b := range []uint64{1, 2} {
		if err := g.checkWrite(&auth.Ticket{Write: true, Term: 3}); err != nil {
			t.Fatal(err)
		}
		g.wrote(b, 3)
	}
	if err := g.checkRead(2, 1, 1); !errors.Is(err, auth.ErrTicketStale) {
		t.Fatalf("term 2 ticket for a block of the registration's term 3: %v", err)
	}
	g.learn(4) // a failover: the ticket of term 3 rides through
	g.wrote(7, 4)
	if err := g.checkRead(3, 1, 2); err != nil {
		t.Fatalf("term 3 ticket for blocks untouched since term 3: %v", err)
	}
	if err := g.checkRead(3, 5, 4); !errors.Is(err, auth.ErrTicketStale) {
		t.Fatalf("term 3 ticket over block 7, rewritten under term 4: %v", err)
	}
	if err := g.checkRead(4, 7, 1); err != nil {
		t.Fatalf("term 4 ticket for a block of term 4: %v", err)
	}
	g.registered(5) // a later registration keeps the base
	if err := g.checkRead(3, 1, 1); err != nil {
		t.Fatalf("term 3 ticket after a registration with term 5: %v", err)
	}

	// A single namenode: term 0 throughout, nothing refused.
	var single groupTerm
	single.registered(0)
	single.wrote(1, 0)
	if err := single.checkRead(0, 0, 10); err != nil {
		t.Fatal(err)
	}
	if len(single.written) != 0 {
		t.Fatalf("a single namenode's datanode records %d block terms", len(single.written))
	}
}
