package clientx

import (
	"context"
	"fmt"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/wire"
)

// Stats are the namenode's counters.
type Stats struct {
	Requests uint64            // requests served since start
	Commits  uint64            // transactions committed
	Batches  uint64            // store transactions (group commits)
	PerOp    map[string]uint64 // requests per operation
	CPU      time.Duration     // CPU time the namenode process used (user + system)
	// LeaseWaits counts the additions to a directory (create, link,
	// rename) put off until another client's lease on it had ended (or
	// the namenode's start-up grace).
	LeaseWaits uint64
	// Syncs counts the namenode's fsyncs that made commits durable (group
	// commit: Commits/Syncs commits per fsync).
	Syncs uint64
}

// NamenodeStats returns the namenode's request counters.
func NamenodeStats(ctx context.Context, c *client.Client) (Stats, error) {
	r, err := hooks.Call(c, ctx, &wire.Request{Op: wire.OpStats})
	if err != nil {
		return Stats{}, err
	}
	if len(r.Counters) < 3 {
		return Stats{}, fmt.Errorf("namenode returned %d counters", len(r.Counters))
	}
	s := Stats{Requests: r.Counters[0], Commits: r.Counters[1], Batches: r.Counters[2], PerOp: map[string]uint64{}}
	ops := r.Counters[3:]
	if len(ops) > wire.NumOps {
		s.CPU = time.Duration(ops[wire.NumOps])
		if len(ops) > wire.NumOps+1 {
			s.LeaseWaits = ops[wire.NumOps+1]
		}
		if len(ops) > wire.NumOps+2 {
			s.Syncs = ops[wire.NumOps+2]
		}
		ops = ops[:wire.NumOps]
	}
	for i, v := range ops {
		if v != 0 {
			s.PerOp[wire.Op(i).String()] = v
		}
	}
	return s, nil
}

// NamenodeRequests returns how many requests c has sent to the namenode so
// far.
func NamenodeRequests(c *client.Client) uint64 { return hooks.Requests(c) }

// NamenodeAddr returns the address of the namenode c is connected to.
func NamenodeAddr(c *client.Client) string { return hooks.Addr(c) }

// Lost reports whether tx was begun on a namenode connection that has
// broken or been replaced since: the namenode has aborted it, and its
// requests fail (reads of data already at hand may still succeed).
func Lost(tx *client.Txn) bool { return hooks.Lost(tx) }

// SetFlushBlocks sets how many dirty blocks f buffers before it writes
// them out (default 64).
func SetFlushBlocks(f *client.File, n int) { hooks.SetFlushBlocks(f, n) }

// ReadAtShared reads like f.ReadAt, but returns the bytes as slices, in
// file order, partly of p and partly of the blocks f holds in memory
// (checked against their checksums), which it does not copy. Call release
// exactly once after the slices were last used (a FUSE reply written):
// until then those blocks are not reused. On an error other than io.EOF
// there are no slices.
func ReadAtShared(f *client.File, p []byte, off int64) (bufs [][]byte, n int, release func(), err error) {
	return hooks.ReadAtShared(f, p, off)
}
