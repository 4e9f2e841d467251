package datanode

import (
	"fmt"
	"sync"

	"github.com/plasmafs/plasma/internal/auth"
)

// groupTerm is the highest namenode group term this datanode has seen:
// from the leader it registered with, and from the tickets it checked
// (a ticket's MAC proves that a namenode leading in its term issued it).
// A ticket that writes with a lower term was issued by a leader since
// deposed and is refused, so nothing a former leader granted (blocks of
// transactions the group never committed, freed and handed out again by
// its successor) writes over what a later leader's clients wrote, even
// where the two leaders drew overlapping block generations. A datanode
// also refuses to register with a namenode of a lower term: a deposed
// leader that does not know it yet.
//
// A single namenode's term is 0 throughout. The term lives in memory: a
// restarted datanode accepts no ticket that writes until it has
// registered (writeFloor), and registration tells it the leader's term.
type groupTerm struct {
	mu   sync.Mutex
	term uint64
}

// learn raises the term to t if t is higher.
func (g *groupTerm) learn(t uint64) {
	g.mu.Lock()
	g.term = max(g.term, t)
	g.mu.Unlock()
}

// current is the highest term seen.
func (g *groupTerm) current() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.term
}

// checkWrite learns the term of a ticket whose MAC checked out and
// refuses it if it writes and its term is below the highest seen.
func (g *groupTerm) checkWrite(t *auth.Ticket) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.term = max(g.term, t.Term)
	if (t.Write || t.Append) && t.Term < g.term {
		return fmt.Errorf("%w: ticket of term %d, this datanode has seen term %d", auth.ErrTicketTermOutdated, t.Term, g.term)
	}
	return nil
}
