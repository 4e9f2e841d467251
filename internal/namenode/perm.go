package namenode

import (
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// Permission bits asked for.
const (
	permRead   = 4
	permWrite  = 2
	permSearch = 1
)

// may reports whether who has the want bits on a. who is nil at security
// level none, where clients are trusted.
func may(who *auth.Identity, a *wire.Attr, want uint32) bool {
	if who == nil || who.Super() {
		return true
	}
	var bits uint32
	switch {
	case a.User == who.User:
		bits = a.Mode >> 6 & 7
	case who.InGroup(a.Group):
		bits = a.Mode >> 3 & 7
	default:
		bits = a.Mode & 7
	}
	return bits&want == want
}

func denied(who *auth.Identity, what string) error {
	return fail(wire.ErrCodePerm, "%s: permission denied for user %s", what, who.User)
}

// needDir checks write and search permission on the directory parent.
func (n *Namenode) needDir(tx *Txn, who *auth.Identity, parent uint64, what string) error {
	if a := n.attr(tx, parent); a != nil && !may(who, a, permWrite|permSearch) {
		return denied(who, what)
	}
	return nil
}

// ticketed adds datanode tickets to the extents of r for tx: read tickets
// for block lists, write tickets for allocations. Without a transaction or
// a ticket key, none are issued.
func (n *Namenode) ticketed(tx *Txn, r *wire.Response) *wire.Response {
	if tx == nil || n.cfg.TicketKey == nil {
		return r
	}
	r.Extents = n.withTickets(tx, r.Extents, false)
	for i := range r.Files {
		r.Files[i].Extents = n.withTickets(tx, r.Files[i].Extents, false)
	}
	return r
}

func (n *Namenode) withTickets(tx *Txn, xs []wire.Extent, write bool) []wire.Extent {
	if tx == nil || n.cfg.TicketKey == nil || len(xs) == 0 {
		return xs
	}
	exp := time.Now().Add(n.cfg.TicketLifetime).Unix()
	out := make([]wire.Extent, len(xs))
	for i, x := range xs {
		x.Tickets = make([][]byte, len(x.Replicas))
		for j, r := range x.Replicas {
			t := auth.Ticket{Tag: tx.tag, Node: r.Node, Start: r.Start, Count: uint64(x.Count), Write: write, Expiry: exp}
			x.Tickets[j] = t.Seal(n.cfg.TicketKey)
			if tx.ticketed == nil {
				tx.ticketed = map[uint32]bool{}
			}
			tx.ticketed[r.Node] = true
		}
		out[i] = x
	}
	return out
}
