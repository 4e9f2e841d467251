package namenode

import (
	"github.com/plasmafs/plasma/internal/auth"
)

// Tickets across leaders of a namenode group. A leader's tickets carry
// the Raft term it leads in (Config.Term; 0 for a single namenode), and a
// registering datanode is told it. A datanode keeps the highest term it
// has seen and refuses tickets that write with a lower one
// (datanode/term.go): once it has heard of a later leader, nothing a
// deposed one granted writes, whatever block generations the two drew
// (a boot epoch raised at takeover orders them only as far as the clocks
// and stored epochs do; see docs/design.md, "Replicated namenodes").

// seal returns t's wire form, carrying this namenode's term.
func (n *Namenode) seal(t auth.Ticket) []byte {
	t.Term = n.cfg.Term
	return t.Seal(n.cfg.TicketKey)
}

// registrationCounters is what a registering datanode is told: the least
// sequence number of the tickets that write it must accept from now on
// (floor), this namenode's term, and 1 if more pages of journaled writes
// follow (journal.go).
func (n *Namenode) registrationCounters(floor uint64, moreJournal bool) []uint64 {
	more := uint64(0)
	if moreJournal {
		more = 1
	}
	return []uint64{floor, n.cfg.Term, more}
}
