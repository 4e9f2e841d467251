package namenode

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
)

// Block generations (see auth.Ticket and docs/design.md, Security): every
// allocation gets a generation larger than every generation handed out
// before, also before a restart, and its write tickets carry it; a read
// ticket carries the current generation. A datanode stores the generation
// of the ticket that wrote each block and refuses older tickets for it.
//
// A generation is boot epoch << genShift plus the allocations since. The
// boot epoch is raised durably at every start, before serving (New, through
// loadStarting), to the larger of the stored epoch plus one and the time in
// Unix seconds: the counter keeps it growing when the clock goes back, the
// clock keeps it growing when the store goes back (a restored backup holds
// an older epoch, while the datanodes hold generations from after it).
// Allocations beyond 2^genShift in one boot run on into the next epochs'
// range, which a later boot's epoch still exceeds as long as there are
// fewer than 2^genShift allocations per second.
const genShift = 32

// generations is a namenode's generation counter: the last generation
// handed out. Safe for concurrent use.
type generations struct{ last atomic.Uint64 }

// loadStarting loads cfg.Store's metadata and starts this boot's
// generations: it raises the stored boot epoch (durably) before the
// namenode can issue any ticket, and returns the generation this boot's
// generations start above. Called by New.
func loadStarting(cfg Config) (*meta.Snapshot, uint64, error) {
	snap, err := cfg.Store.Load(context.Background())
	if err != nil {
		return nil, 0, err
	}
	epoch := uint64(time.Now().Unix())
	if st, ok := cfg.Store.(meta.BootEpocher); ok {
		if epoch, err = st.RaiseBootEpoch(epoch); err != nil {
			return nil, 0, err
		}
	} else if cfg.TicketKey != nil {
		cfg.Logger.Warn("the metadata store keeps no boot epoch: block generations rely on the clock alone")
	}
	if epoch >= 1<<(64-genShift-1) {
		return nil, 0, fmt.Errorf("boot epoch %d out of range", epoch)
	}
	return snap, epoch << genShift, nil
}

// raise makes the last generation at least v.
func (g *generations) raise(v uint64) {
	for {
		cur := g.last.Load()
		if cur >= v || g.last.CompareAndSwap(cur, v) {
			return
		}
	}
}

// newGen returns the generation of a new allocation.
func (n *Namenode) newGen() uint64 { return n.gens.last.Add(1) }

// currentGen returns the generation of a read ticket: at least that of
// every allocation made so far.
func (n *Namenode) currentGen() uint64 { return n.gens.last.Load() }

// registrationFloor returns the generation a registering datanode is told:
// a new one, above the sequence number (auth.Ticket.Seq) of every write
// and append ticket issued so far, which it refuses from now on (their
// transactions' revocations may be lost with a restart of either side).
func (n *Namenode) registrationFloor() uint64 { return n.newGen() }
