package namenode

// freeingBlocks counts the blocks on live datanodes that are freed but not
// yet free for allocation: waiting in the free queue (for older
// transactions to end and the freeing batch to be durable), or being
// released by a sparse datanode (sent in a heartbeat's answer, not yet
// acknowledged). Within a few heartbeats they are free again, so an
// allocation they would satisfy is told to wait, not that the cluster is
// full: 'plasma rm' followed at once by 'plasma put' must not say ENOSPC.
// Called with n.mu held.
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
	for _, pf := range n.frees.q {
		for _, r := range pf.runs {
			if live[r.node] {
				total += r.count
			}
		}
	}
	return total
}
