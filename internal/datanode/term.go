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
//
// Read tickets of an older term stay good (a reader rides through a
// failover with the tickets it has), but only for blocks not written
// since under a later term: written holds the term of each block's last
// write where it is above base, and base covers every other block (the
// term of this process's first registration: blocks written before a
// restart were written under a term no later than that; 0 until then). A
// deposed leader's read ticket thus never opens a block its successor
// reallocated and rewrote, even where the two leaders drew overlapping
// generations: the content it was issued for is gone, and the read fails
// as one of a freed block does (auth.ErrTicketStale).
type groupTerm struct {
	mu      sync.Mutex
	term    uint64
	base    uint64
	based   bool              // base is set (first registration)
	written map[uint64]uint64 // block -> term of its last write, if above base
}

// learn raises the term to t if t is higher.
func (g *groupTerm) learn(t uint64) {
	g.mu.Lock()
	g.term = max(g.term, t)
	g.mu.Unlock()
}

// registered learns the term t of a registration's leader and, at the
// first one, makes it the term of every block written before (base).
func (g *groupTerm) registered(t uint64) {
	g.mu.Lock()
	g.term = max(g.term, t)
	if !g.based {
		g.base, g.based = t, true
		for b, w := range g.written {
			if w <= t {
				delete(g.written, b)
			}
		}
	}
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

// wrote records that block is being written under a ticket of term t
// (one checkWrite accepted, so t is the highest term seen). Called before
// the block's data changes: a reader checking after its read (checkRead)
// cannot have read data of a later term unnoticed.
func (g *groupTerm) wrote(block, t uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t <= g.base {
		delete(g.written, block)
		return
	}
	if g.written == nil {
		g.written = make(map[uint64]uint64)
	}
	g.written[block] = max(g.written[block], t)
}

// checkRead refuses a read ticket of term t for count blocks from block
// if any of them was written under a later term.
func (g *groupTerm) checkRead(t, block, count uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t >= g.term {
		return nil // no block was written under a later term
	}
	for b := block; b < block+count; b++ {
		w, ok := g.written[b]
		if !ok {
			w = g.base
		}
		if w > t {
			return fmt.Errorf("%w: block %d was written under namenode group term %d, the ticket is of term %d (issued by a leader since deposed)", auth.ErrTicketStale, b, w, t)
		}
	}
	return nil
}
