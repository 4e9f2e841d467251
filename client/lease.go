package client

import (
	"context"
	"fmt"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
)

// A DirLease is the namenode's promise that until Expires no other client
// adds a name to directory Dir. A client holding one knows every name the
// directory has (the listing that came with a new lease plus the names it
// added itself), so it can answer "no such name" without asking: this is
// how a mount answers the lookup that precedes each create.
//
// The lease is counted from before the request was sent, so it ends here
// before it ends at the namenode. It also ends when the client's
// namenode connection is replaced (Valid reports false).
type DirLease struct {
	Dir     uint64
	Expires time.Time
	Term    time.Duration // the lease's length, for planning renewals
	// New reports a lease that did not continue an earlier one: Names is
	// the directory's complete listing when it was granted. A renewal
	// (New false) means the names known from before are still complete.
	New   bool
	Names []string
	gen   uint64
}

// LeaseDir asks for a lease on directory dir, or renews the client's
// running one. ok is false when the namenode gives no lease now (another
// client holds or recently gave up one, or the directory is too large).
func (c *Client) LeaseDir(ctx context.Context, dir uint64) (l DirLease, ok bool, err error) {
	nn, gen := c.conn()
	sent := time.Now()
	r, err := nn.Call(ctx, &wire.Request{Op: wire.OpLeaseDir, Ino: dir})
	if err != nil {
		return DirLease{}, false, err
	}
	if err := c.noteResponse(r); err != nil {
		return DirLease{}, false, err
	}
	if len(r.Counters) < 2 {
		return DirLease{}, false, fmt.Errorf("%w: lease of directory %d: short answer", ErrInternal, dir)
	}
	if r.Counters[0] == 0 {
		return DirLease{}, false, nil
	}
	term := time.Duration(r.Counters[0])
	// A little under the term: clocks of two machines may run at slightly
	// different rates.
	return DirLease{Dir: dir, Expires: sent.Add(term - term/64), Term: term, New: r.Counters[1] == 1, Names: r.Paths, gen: gen}, true, nil
}

// LeaseValid reports whether l still holds: not expired, and granted on
// the client's current namenode connection.
func (c *Client) LeaseValid(l DirLease) bool {
	_, gen := c.conn()
	return l.gen == gen && time.Now().Before(l.Expires)
}
