package namenode

import "time"

// BlockHealth counts the blocks that need an operator's attention, for the
// status page and /metrics, from the replicator's last full scan
// (replicator.go) and the damaged replicas datanodes reported.
type BlockHealth struct {
	// UnderReplicated: blocks with fewer good replicas (on live datanodes
	// in service) than their file's replication; Waiting of them lack only
	// replicas on datanodes dead for less than DeadAfter, Lost have no
	// readable replica at all.
	UnderReplicated, Waiting, Lost uint64
	// Queued: blocks waiting in the re-replication queue.
	Queued uint64
	// Damaged: replicas reported damaged (a failed checksum) and not yet
	// trimmed.
	Damaged uint64
	At      time.Time // when the scan counted them (zero: not yet)
}

// blockHealth reads the replicator's counts. Called with n.mu held.
func (n *Namenode) blockHealth() BlockHealth {
	rp := n.repl
	h := BlockHealth{UnderReplicated: rp.last.under, Waiting: rp.last.waiting, Lost: rp.last.lost,
		Damaged: uint64(len(rp.bad)), At: rp.last.at}
	for _, items := range rp.queue {
		for _, it := range items {
			h.Queued += uint64(it.x.Count)
		}
	}
	return h
}
