package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
)

// DefaultAllocWait is how long a request that places data waits for the
// datanodes a namenode knows to register with it (Config.AllocWait): a
// restarted namenode, or a group member that just took over, hears from
// them within a few heartbeats; the namenode's -dead-after is 30 s too.
const DefaultAllocWait = 30 * time.Second

// Backoff between attempts of a waiting request: short at first (a
// registration takes a round trip or two), then at most a second apart.
const (
	allocWaitFirst = 20 * time.Millisecond
	allocWaitMax   = time.Second
)

// waitsForDatanodes reports whether err is the namenode's refusal of q
// for want of live datanodes to place data on (ErrUnavailable of an
// allocation, of a file's creation, of a change of replication), the
// refusals registering datanodes end. An allocation that excludes
// datanodes a write just failed on is not held: its writer reports that
// failure at once, as before.
func waitsForDatanodes(q *wire.Request, err error) bool {
	var nerr *Error
	if !errors.As(err, &nerr) || wire.Code(nerr.Code) != wire.ErrCodeUnavailable {
		return false
	}
	switch q.Op {
	case wire.OpAllocate:
		for _, p := range q.Pref {
			if strings.HasPrefix(p, "-") {
				return false
			}
		}
		return true
	case wire.OpCreate:
		return q.Type == wire.TypeFile && q.Rep <= wire.MaxReplica
	case wire.OpSetAttr:
		return q.Flags&wire.FlagRep != 0 && q.Rep <= wire.MaxReplica
	}
	return false
}

// waitForDatanodes sends q again, with backoff, while the namenode
// refuses it for want of live datanodes and some datanode it knows has
// not registered yet, up to Config.AllocWait (and the context's
// deadline). Every frontend (the CLI, KV, MapReduce, the mount and the
// NFS bridge) places data through here, so none fails across a namenode
// restart or failover for datanodes that are on their way. A refusal no
// wait can end (every datanode the namenode knows is alive: too few for
// the replication) is returned at once; ENOSPC is not a refusal of this
// kind at all.
func (tx *Txn) waitForDatanodes(ctx context.Context, q *wire.Request, err error) (*wire.Response, error) {
	wait := tx.c.cfg.AllocWait
	if wait == 0 {
		wait = DefaultAllocWait
	}
	if wait < 0 {
		return nil, err
	}
	start := time.Now()
	deadline := start.Add(wait)
	delay := allocWaitFirst
	for {
		pending, known, lerr := tx.c.unregisteredDatanodes(ctx)
		switch {
		case spaceFreeing(err):
			// Blocks on their way back: a heartbeat or two.
		case lerr == nil && known == 0:
			return nil, fmt.Errorf("%w (namenode %s knows no datanode: start one, see 'plasma admin datanodes')",
				err, tx.c.namenodeAddr())
		case lerr == nil && pending == 0:
			return nil, fmt.Errorf("%w (namenode %s: every datanode it knows is alive, so waiting would not help; start more datanodes or lower the file's replication, see 'plasma admin datanodes')",
				err, tx.c.namenodeAddr())
		}
		left := time.Until(deadline)
		if left <= 0 && spaceFreeing(err) {
			return nil, fmt.Errorf("%w (namenode %s: waited %v for the space being freed; files being read by long transactions keep their blocks until those end; client.Config.AllocWait or $PLASMAFS_ALLOC_WAIT sets the wait)",
				err, tx.c.namenodeAddr(), time.Since(start).Round(time.Millisecond))
		}
		if left <= 0 {
			missing := fmt.Sprintf("%d of them have not", pending)
			if lerr != nil {
				missing = fmt.Sprintf("its datanode list could not be read: %v", lerr)
			}
			return nil, fmt.Errorf("%w (namenode %s: waited %v for the datanodes it knows to register, %s; start them or check they reach the namenode, see 'plasma admin datanodes'; client.Config.AllocWait or $PLASMAFS_ALLOC_WAIT sets the wait)",
				err, tx.c.namenodeAddr(), time.Since(start).Round(time.Millisecond), missing)
		}
		sleep := min(delay/2+rand.N(delay/2+1), left)
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (namenode %s: gave up waiting for its datanodes to register after %v: %w)",
				err, tx.c.namenodeAddr(), time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, allocWaitMax)
		if tx.auto {
			// The namenode aborted the compound request's transaction
			// with its refusal: the attempt after is a new one.
			tx.restartAuto()
		}
		var r *wire.Response
		r, err = tx.callOnce(ctx, q)
		if err == nil || !waitsForDatanodes(q, err) {
			return r, err
		}
	}
}

// spaceFreeing reports whether err is the namenode's refusal of an
// allocation that blocks being freed would satisfy.
func spaceFreeing(err error) bool {
	var nerr *Error
	return errors.As(err, &nerr) && strings.Contains(nerr.Msg, wire.SpaceFreeing)
}

// restartAuto makes an Auto transaction whose request the namenode
// refused (and so aborted) new again, under a new id.
func (tx *Txn) restartAuto() {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.id = tx.c.nextTx.Add(1)
	tx.used, tx.ended = false, false
}

// unregisteredDatanodes counts the enabled datanodes the namenode knows
// (known) and those of them that are not alive (pending): those a wait
// for registrations may bring.
func (c *Client) unregisteredDatanodes(ctx context.Context) (pending, known int, err error) {
	nodes, err := c.Datanodes(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, d := range nodes {
		if !d.Enabled {
			continue
		}
		known++
		if !d.Alive {
			pending++
		}
	}
	return pending, known, nil
}
