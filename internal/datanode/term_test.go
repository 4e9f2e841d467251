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
