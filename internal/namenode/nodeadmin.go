package namenode

// OpNodeAdmin: the replication queue and the datanodes' service states
// (plasma admin datanodes, plasma admin datanode
// drain|disable|enable|remove, plasma fsck). Superuser only.

import (
	"fmt"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// Datanode service states in a status answer (wire.NodeStatus*).
const (
	nodeInService = iota
	nodeAway      // dead for less than DeadAfter
	nodeDead      // dead for longer: its replicas are replaced
	nodeDisabled  // takes no new blocks, keeps its replicas
	nodeDraining  // its replicas are being moved off
	nodeDrained   // draining, and it holds no replica any more
)

// statusHead is how many counters precede the per-datanode ones in a
// status answer, and statusPerNode how many each datanode has.
const (
	statusHead    = 10
	statusPerNode = 6
)

// maxStatusTasks bounds the copies in flight a status answer lists.
const maxStatusTasks = 100

func (n *Namenode) opNodeAdmin(c *conn, _ *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
	switch q.Path {
	case "status":
		return n.freshStatus(), nil
	case "damaged":
		// fsck found these replicas (one block each, with the committed
		// checksum their data fails) damaged.
		for _, x := range q.Extents {
			if len(x.Replicas) == 1 && len(x.CRC) == 1 {
				n.condemn(x.Replicas[0], x.CRC[0])
			}
		}
		return n.freshStatus(), nil
	case "scrub":
		return n.scrubStatus(), nil
	case "balance":
		n.log.Info("balancing datanodes")
		n.replicationScan(time.Now(), nil) // the plan starts from fresh counts
		n.repl.balancing = true
		return n.freshStatus(), nil
	}
	dn := n.nodes.get(uint32(q.Index))
	if dn == nil {
		return nil, fail(wire.ErrCodeNotFound, "no datanode with id %d ('plasma admin datanodes' lists them)", q.Index)
	}
	rec := dn.Datanode
	var draining bool
	switch q.Path {
	case "drain":
		rec.Enabled, draining = false, true
	case "disable":
		rec.Enabled = false
	case "enable":
		rec.Enabled = true
	case "remove":
		n.freshStatus() // counts every replica it holds, now
		ch, err := n.removeDatanode(dn, time.Now())
		if err != nil {
			return nil, err
		}
		n.deferChange(ch)
		return nil, n.answerDurable(c, n.freshStatus())
	default:
		return nil, fail(wire.ErrCodeInvalid, "datanode operation %q: one of status, scrub, balance, damaged, drain, disable, enable, remove", q.Path)
	}
	n.log.Info("datanode state changed", "node", dn.Identity, "id", dn.ID, "op", q.Path)
	ch := n.serviceChange(dn, rec, draining)
	if ch == nil {
		return n.freshStatus(), nil
	}
	// In memory at once (allocations follow it); answered once the
	// record (enabled, drain mark) is durable, so the state outlives a
	// namenode restart from then on.
	dn.Datanode = rec
	if draining {
		n.repl.draining[dn.ID] = true
	} else {
		delete(n.repl.draining, dn.ID)
	}
	n.deferChange(ch)
	return nil, n.answerDurable(c, n.freshStatus())
}

// freshStatus scans before it answers, so that what it says (a datanode
// drained, nothing queued) holds for every commit acknowledged before the
// request (as costly as one background scan; admin commands and fsck
// ask, rarely).
func (n *Namenode) freshStatus() *wire.Response {
	n.replicationScan(time.Now(), nil)
	n.scheduleCopies()
	return n.replicationStatus()
}

// replicationStatus answers the replication queue and each datanode's
// state (Counters, see statusHead), the datanodes (Nodes) and the copies
// in flight (Paths, at most maxStatusTasks).
func (n *Namenode) replicationStatus() *wire.Response {
	rp := n.repl
	now := time.Now()
	s := rp.last
	var queued, inflight uint64
	for _, it := range rp.queued() {
		queued += uint64(it.x.Count)
	}
	var tasks []string
	for t := range rp.tasks {
		inflight += uint64(t.count)
		if len(tasks) < maxStatusTasks {
			p, err := n.pathOf(nil, t.ino)
			if err != nil {
				p = fmt.Sprintf("inode %d", t.ino)
			}
			tasks = append(tasks, fmt.Sprintf("%s: blocks %d-%d from datanode %d to datanode %d, for %v", p, t.index, t.index+uint64(t.count)-1,
				t.src.Node, t.dst.Node, now.Sub(t.started).Round(time.Millisecond)))
		}
	}
	nodes := n.nodeList()
	c := make([]uint64, 0, statusHead+statusPerNode*len(nodes))
	c = append(c, queued, inflight, s.under, s.lost, s.waiting, rp.copied, rp.trimmed, rp.failed, uint64(len(rp.bad)), boolCounter(rp.balancing))
	for _, ni := range nodes {
		dn := n.nodes.get(ni.ID)
		seen := uint64(0)
		if !dn.lastSeen.IsZero() {
			seen = uint64(dn.lastSeen.UnixNano())
		}
		c = append(c, uint64(ni.ID), n.nodeState(dn, now, s), s.blocks[ni.ID], seen, uint64(rp.busy[ni.ID]), s.moveOff[ni.ID])
	}
	return &wire.Response{Counters: c, Nodes: nodes, Paths: tasks}
}

func (n *Namenode) nodeState(dn *dnode, now time.Time, s repScan) uint64 {
	switch {
	case n.repl.draining[dn.ID] && s.blocks[dn.ID] == 0 && n.repl.busy[dn.ID] == 0:
		// Empty, and no copy started before the drain is bringing a
		// replica to it.
		return nodeDrained
	case n.repl.draining[dn.ID]:
		return nodeDraining
	case !dn.alive && now.Sub(n.repl.lastSeen(dn)) >= n.repl.deadAfter:
		return nodeDead
	case !dn.alive:
		return nodeAway
	case !dn.Enabled:
		return nodeDisabled
	}
	return nodeInService
}

// opBadBlock: a datanode's scrubber found its block q.Index failing its
// recorded checksum q.Count. The replica counts for nothing from now on if
// that is the committed version's checksum (a block being written, whose
// entry is not recorded yet, is not condemned): the next scan copies the
// block from a good replica and then trims this one.
func (n *Namenode) opBadBlock(c *conn, _ *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Node == nil {
		return nil, fail(wire.ErrCodeInvalid, "bad block report without node")
	}
	dn := n.nodes.lookup(q.Node.Identity)
	if dn == nil || dn.conn != c {
		return nil, fail(wire.ErrCodeInvalid, "bad block report from an unregistered datanode")
	}
	n.condemn(wire.Run{Node: dn.ID, Start: q.Index}, uint32(q.Count))
	return &wire.Response{}, nil
}

// condemn records replica r (one block) as damaged in the version with
// checksum crc and has it replaced. Called with n.mu held.
func (n *Namenode) condemn(r wire.Run, crc uint32) {
	n.log.Warn("damaged replica reported", "node", r.Node, "block", r.Start)
	n.repl.bad[r] = crc
	n.repl.forceFull = true
	n.repl.wake()
}

func boolCounter(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
