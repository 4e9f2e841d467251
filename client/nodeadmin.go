package client

import (
	"context"
	"fmt"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
)

// ReplicationStatus is the namenode's re-replication queue and the
// service state of each datanode.
type ReplicationStatus struct {
	Queued   uint64 `json:"queued"`    // blocks waiting for a copy
	InFlight uint64 `json:"in_flight"` // blocks being copied
	// Under counts blocks with fewer good replicas than their file's
	// replication; Waiting those of them whose missing replicas are on
	// datanodes dead for less than the namenode's -dead-after (they may
	// come back); Lost those with no replica on a live datanode.
	Under   uint64 `json:"under_replicated"`
	Waiting uint64 `json:"waiting"`
	Lost    uint64 `json:"lost"`
	// Since the namenode started: blocks copied and attached, replicas
	// trimmed (surplus, or replaced), copy tasks that failed.
	Copied  uint64 `json:"copied"`
	Trimmed uint64 `json:"trimmed"`
	Failed  uint64 `json:"failed"`
	// Damaged counts replicas datanodes' scrubbers reported damaged that
	// are still listed (being replaced, or the block's only replica).
	Damaged uint64 `json:"damaged"`
	// Balancing: 'plasma admin balance' was asked and is not done.
	Balancing bool             `json:"balancing"`
	Nodes     []DatanodeStatus `json:"-"`
	Copies    []string         `json:"copies"` // the copies in flight, one line each
}

// DatanodeStatus is a datanode as the replicator sees it.
type DatanodeStatus struct {
	Datanode
	// State: "in service", "down" (dead, its replicas still counted),
	// "dead" (dead longer than -dead-after: its replicas are replaced),
	// "disabled" (no new blocks), "draining", "drained".
	State    string
	Replicas uint64    // blocks it holds replicas of
	LastSeen time.Time // last registration or heartbeat (zero: never since the namenode started)
	Copies   int       // copies in flight it takes part in
	Leaving  uint64    // blocks queued or in flight to be copied off it
}

var nodeStates = []string{"in service", "down", "dead", "disabled", "draining", "drained"}

// Status counters: the head, then per datanode (namenode/nodeadmin.go).
const (
	statusHead    = 10
	statusPerNode = 6
)

// ReplicationStatus asks the namenode for its replication queue and the
// datanodes' states (superuser).
func (c *Client) ReplicationStatus(ctx context.Context) (ReplicationStatus, error) {
	return c.nodeAdmin(ctx, "status", 0)
}

// DatanodeAdmin changes the service state of datanode id: "drain" (move
// every replica off it, then it stays disabled), "disable" (no new
// blocks), "enable" (back in service); or, with id 0, "balance" (move
// replicas from the fullest datanodes to the emptiest until every one is
// within 5% of the average use). It returns the status after the
// change (the drain goes on in the background).
func (c *Client) DatanodeAdmin(ctx context.Context, op string, id uint32) (ReplicationStatus, error) {
	return c.nodeAdmin(ctx, op, id)
}

func (c *Client) nodeAdmin(ctx context.Context, op string, id uint32) (ReplicationStatus, error) {
	r, err := c.call(ctx, &wire.Request{Op: wire.OpNodeAdmin, Path: op, Index: uint64(id)})
	if err != nil {
		return ReplicationStatus{}, err
	}
	cs := r.Counters
	if len(cs) != statusHead+statusPerNode*len(r.Nodes) {
		return ReplicationStatus{}, fmt.Errorf("datanode status: the namenode answered %d counters for %d datanodes", len(cs), len(r.Nodes))
	}
	s := ReplicationStatus{Queued: cs[0], InFlight: cs[1], Under: cs[2], Lost: cs[3], Waiting: cs[4], Copied: cs[5], Trimmed: cs[6], Failed: cs[7], Damaged: cs[8], Balancing: cs[9] != 0, Copies: r.Paths}
	for i, n := range r.Nodes {
		v := cs[statusHead+statusPerNode*i:]
		st := "unknown"
		if v[1] < uint64(len(nodeStates)) {
			st = nodeStates[v[1]]
		}
		d := DatanodeStatus{Datanode: datanodeOf(n), State: st, Replicas: v[2], Copies: int(v[4]), Leaving: v[5]}
		if v[3] != 0 {
			d.LastSeen = time.Unix(0, int64(v[3]))
		}
		s.Nodes = append(s.Nodes, d)
	}
	return s, nil
}
