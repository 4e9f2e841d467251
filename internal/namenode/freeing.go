package namenode

import "time"

// freeingBlocks counts the blocks on live datanodes that are freed and on
// their way back: being released by a sparse datanode (sent, or to be
// sent, in a heartbeat's answer, not yet acknowledged), or in the free
// queue with no older transaction open and the batch that freed them
// durable, or durable within a short window (soonFreed). Within a few
// heartbeats they are free again, so an allocation they would satisfy is
// told to wait, not that the cluster is full: 'plasma rm' followed at once
// by 'plasma put' must not say ENOSPC. Frees that a transaction begun
// before them still holds (a reader of the old version) are not counted,
// nor those behind a long window: they may wait that long, and a full
// cluster says so at once. Called with n.mu held.
func (n *Namenode) freeingBlocks() uint64 {
	live := map[uint32]bool{}
	var total uint64
	for _, dn := range n.nodes.live() {
		live[dn.ID] = true
		for _, r := range dn.space.release {
			total += r.count
		}
		for _, r := range dn.space.sent {
			total += r.count
		}
	}
	oldest := n.txns.oldestStart(n.epoch + 1)
	for _, pf := range n.frees.q {
		// Still read by an older transaction, or waiting for a batch
		// that becomes durable only after a long window: not soon.
		if pf.epoch > oldest || (pf.needSeq > n.durableSeq && n.cfg.SyncInterval > soonFreed) {
			break // the queue is in order of both
		}
		for _, r := range pf.runs {
			if live[r.node] {
				total += r.count
			}
		}
	}
	return total
}

// soonFreed bounds the durability window (-sync-interval) within which
// blocks freed by a commit not yet durable count as on their way back.
const soonFreed = 5 * time.Second
