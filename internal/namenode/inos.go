package namenode

import "github.com/plasmafs/plasma/internal/meta"

// inoChunk inode numbers are reserved durably at a time, so numbers are
// never reused across restarts without a store write per create.
const inoChunk = 1 << 16

// inoCounter hands out inode numbers. A number is never handed out twice,
// not even across restarts: numbers are reserved a chunk at a time, and
// the reservation (the new limit) is made durable through the committer
// before any commit that uses a number past the old limit. A namenode
// starts counting at the stored limit, above every number its
// predecessor handed out.
//
// Lock discipline: guarded by Namenode.mu.
type inoCounter struct {
	next, limit uint64
}

// take returns the next number; reserve is called with the new limit
// first when the reservation is used up.
func (c *inoCounter) take(reserve func(limit uint64)) uint64 {
	if c.next >= c.limit {
		c.limit = c.next + inoChunk
		reserve(c.limit)
	}
	ino := c.next
	c.next++
	return ino
}

// newIno returns a fresh inode number. Called with n.mu held.
//
// The reservation of a new chunk goes to the committer like any change: it
// is queued before the create that needs it returns, so it is in the same
// store batch as (or an earlier one than) any commit using those numbers.
// A crash before that batch loses only numbers nobody committed.
func (n *Namenode) newIno() uint64 {
	return n.inos.take(func(limit uint64) { n.deferChange(&meta.Change{InoLimit: limit}) })
}
