package namenode

import (
	"fmt"
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

// reachable reports whether who could reach inode ino by some path: it
// has search permission on every directory from the root down to a
// directory that names ino. Inode-addressed requests are checked with it,
// so an inode number (they are sequential) opens nothing its paths do not.
// Inodes tx already holds (created, changed or read through a checked
// request) stay reachable for tx.
func (n *Namenode) reachable(tx *Txn, who *auth.Identity, ino uint64) bool {
	if who == nil || who.Super() || ino == rootIno {
		return true
	}
	if tx != nil && (tx.inodes[ino] != nil || tx.used[ino]) {
		return true
	}
	in := n.ns.inodes[ino]
	if in == nil {
		return true // not found is reported by the operation
	}
	if in.attr.Type == wire.TypeDir {
		return n.searchable(tx, who, n.ns.parentOf(tx, ino))
	}
	for p := range in.links {
		if n.searchable(tx, who, p) {
			return true
		}
	}
	return false
}

// reach is reachable as the error inode-addressed requests answer:
// permission denied for "inode ino".
func (n *Namenode) reach(tx *Txn, who *auth.Identity, ino uint64) error {
	if !n.reachable(tx, who, ino) {
		return denied(who, fmt.Sprintf("inode %d", ino))
	}
	return nil
}

// searchable reports whether who may search dir and every directory above
// it.
func (n *Namenode) searchable(tx *Txn, who *auth.Identity, dir uint64) bool {
	for depth := 0; depth < 4096; depth++ {
		a := n.ns.attr(tx, dir)
		if a == nil || !may(who, a, permSearch) {
			return false
		}
		if dir == rootIno {
			return true
		}
		dir = n.ns.parentOf(tx, dir)
	}
	return false
}

// checkSticky refuses when the sticky bit of directory parent keeps who
// from removing or renaming the entry for child (p names it): only the
// owners of the directory or of the entry, and the superuser, may.
func (n *Namenode) checkSticky(tx *Txn, who *auth.Identity, parent, child uint64, p string) error {
	if who == nil || who.Super() {
		return nil
	}
	pa, ca := n.ns.attr(tx, parent), n.ns.attr(tx, child)
	if pa == nil || ca == nil || pa.Mode&0o1000 == 0 {
		return nil
	}
	if pa.User != who.User && ca.User != who.User {
		return denied(who, p+" (sticky directory)")
	}
	return nil
}

// needDir checks write and search permission on the directory parent.
func (n *Namenode) needDir(tx *Txn, who *auth.Identity, parent uint64, what string) error {
	if a := n.ns.attr(tx, parent); a != nil && !may(who, a, permWrite|permSearch) {
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
	size := int64(-1)
	if r.Attr != nil {
		size = r.Attr.Size
	}
	r.Extents = n.readTickets(tx, r.Extents, size)
	for i := range r.Files {
		r.Files[i].Extents = n.readTickets(tx, r.Files[i].Extents, r.Files[i].Size)
	}
	return r
}

// readTickets returns xs with read tickets for a file of the given size
// (-1: unknown). The tickets of the extent holding the file's last block,
// if that block is partly filled, are limited to the block's bytes in this
// version (auth.Ticket.From): the block may be extended in place later,
// and a holder of these tickets must not read what was appended after them
// (by a writer who, say, made the file unreadable to it first), nor what
// an extension left uncommitted.
func (n *Namenode) readTickets(tx *Txn, xs []wire.Extent, size int64) []wire.Extent {
	bs := int64(n.cfg.Blocksize)
	limitIdx, limit := uint64(0), uint64(0)
	if size > 0 && size%bs != 0 {
		limitIdx = uint64((size - 1) / bs)
		limit = uint64(size - int64(limitIdx)*bs)
	}
	return n.sealTickets(tx, xs, false, limitIdx, limit)
}

// withTickets returns xs with a ticket for each replica: write tickets (for
// blocks just allocated) carry a new generation, read tickets the current
// one (see gen.go).
func (n *Namenode) withTickets(tx *Txn, xs []wire.Extent, write bool) []wire.Extent {
	return n.sealTickets(tx, xs, write, 0, 0)
}

// sealTickets is withTickets whose read tickets for an extent ending in
// file block limitIdx carry limit (0: none) as their From.
func (n *Namenode) sealTickets(tx *Txn, xs []wire.Extent, write bool, limitIdx, limit uint64) []wire.Extent {
	if tx == nil || n.cfg.TicketKey == nil || len(xs) == 0 {
		return xs
	}
	exp := time.Now().Add(n.cfg.TicketLifetime).Unix()
	cur := n.currentGen()
	out := make([]wire.Extent, len(xs))
	for i, x := range xs {
		// A write ticket carries its allocation's generation, drawn
		// for it now, also as its sequence number (a datanode that
		// registered since refuses it); a read ticket the current one,
		// and at least the allocation's: blocks their allocation did
		// not write stay unreadable.
		gen, minGen, seq := cur, x.Gen, uint64(0)
		if write {
			gen, minGen = x.Gen, 0
			if gen == 0 {
				gen = n.newGen()
			}
			seq = gen
		}
		x.Tickets = make([][]byte, len(x.Replicas))
		for j, r := range x.Replicas {
			t := auth.Ticket{Tag: tx.tag, Node: r.Node, Start: r.Start, Count: uint64(x.Count), Write: write, Expiry: exp, Gen: gen, MinGen: minGen, Seq: seq}
			if !write && limit > 0 && x.Index+uint64(x.Count)-1 == limitIdx {
				t.From = limit
			}
			x.Tickets[j] = n.seal(t)
			if tx.ticketed == nil {
				tx.ticketed = map[uint32]bool{}
			}
			tx.ticketed[r.Node] = true
		}
		out[i] = x
	}
	return out
}
