package namenode

// Balancing (plasma admin balance): after a datanode was added, the
// others hold more than their share. While balancing, each full scan
// queues, behind every under-replicated block, extents with a replica on a
// datanode fuller than the average by more than balanceSlack, as many
// blocks as that datanode holds above the average; they are copied to the
// emptiest datanode that holds none of them, and the next scan of the file
// trims the surplus replica, which the trim policy takes from the fullest
// datanode. Balancing ends when no datanode is off the average by more
// than balanceSlack, or when nothing can be moved.

import (
	"github.com/plasmafs/plasma/internal/wire"
)

// balanceSlack is how far (a fraction of capacity) a datanode may be off
// the average use and count as balanced.
const balanceSlack = 0.05

// balancePlan is what one full scan may queue for balancing.
type balancePlan struct {
	excess map[uint32]int64 // blocks each over-full datanode should shed
}

// planBalance decides, from the last full scan's counts, which datanodes
// shed blocks; nil when balancing is off or done (it then turns off).
// Called with n.mu held.
func (n *Namenode) planBalance() *balancePlan {
	rp := n.repl
	if !rp.balancing {
		return nil
	}
	var used, capacity float64
	var nodes []*dnode
	bs := uint64(n.cfg.Blocksize)
	for _, dn := range n.nodes.live() {
		if rp.draining[dn.ID] {
			continue
		}
		nodes = append(nodes, dn)
		used += float64(rp.last.blocks[dn.ID])
		capacity += float64(dn.capacityBlocks(bs))
	}
	if capacity == 0 {
		rp.balancing = false
		return nil
	}
	avg := used / capacity
	p := &balancePlan{excess: map[uint32]int64{}}
	under := false
	for _, dn := range nodes {
		c := float64(max(dn.capacityBlocks(bs), 1))
		u := float64(rp.last.blocks[dn.ID]) / c
		switch {
		case u > avg+balanceSlack:
			p.excess[dn.ID] = int64((u - avg) * c)
		case u < avg-balanceSlack:
			under = true
		}
	}
	for t := range rp.tasks {
		if t.balanceFrom != 0 {
			p.excess[t.balanceFrom] -= int64(t.count) // on its way already
		}
	}
	for id, k := range rp.moved {
		p.excess[id] -= k // copied since the counts, its trim still to come
	}
	if len(p.excess) == 0 || !under {
		n.log.Info("datanodes balanced")
		rp.balancing = false
		return nil
	}
	return p
}

// balanceItem queues extent x of file ino for a move off an over-full
// datanode if it has a replica there and the plan still wants blocks
// from it. x has exactly its file's replication of good replicas.
func (p *balancePlan) item(rp *replicator, ino uint64, x wire.Extent) {
	for _, r := range x.Replicas {
		if p.excess[r.Node] <= 0 {
			continue
		}
		p.excess[r.Node] -= int64(x.Count)
		rp.queue[ino] = append(rp.queue[ino], repItem{ino: ino, x: x, present: len(x.Replicas), from: r.Node})
		return
	}
}
