package clientx

import (
	"context"
	"fmt"
	"time"

	"github.com/plasmafs/plasma/client"
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
// namenode connection is replaced (LeaseValid reports false).
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

// LeaseDir asks for a lease on directory dir, or renews c's running one.
// ok is false when the namenode gives no lease now (another client holds
// or recently gave up one, or the directory is too large).
func LeaseDir(ctx context.Context, c *client.Client, dir uint64) (l DirLease, ok bool, err error) {
	sent := time.Now()
	r, gen, err := hooks.LeaseCall(c, ctx, &wire.Request{Op: wire.OpLeaseDir, Ino: dir})
	if err != nil {
		return DirLease{}, false, err
	}
	if len(r.Counters) < 2 {
		return DirLease{}, false, fmt.Errorf("%w: lease of directory %d: short answer", client.ErrInternal, dir)
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
// c's current namenode connection.
func LeaseValid(c *client.Client, l DirLease) bool {
	return l.gen == hooks.Generation(c) && time.Now().Before(l.Expires)
}
