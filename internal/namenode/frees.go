package namenode

// freeQueue holds blocks that commits (or orphan deletions) dropped from
// block lists, in the order they were freed, until they may be reused:
// once no open transaction began before they were freed (it may still
// read them) and the store batch that freed them is durable (reused
// earlier, a power cut could bring back the freeing commit's victim with
// another file's data in its blocks).
//
// Lock discipline: no mutex of its own; guarded by Namenode.mu.
type freeQueue struct {
	q []pendingFree
}

type pendingFree struct {
	epoch   uint64 // freed after transactions that began before this ended
	needSeq uint64 // ... and once store batch needSeq is durable
	runs    []run
}

// add queues pf. Epochs and batch numbers only grow, so the queue stays
// in order of both.
func (f *freeQueue) add(pf pendingFree) { f.q = append(f.q, pf) }

// empty reports whether nothing waits.
func (f *freeQueue) empty() bool { return len(f.q) == 0 }

// due removes and returns the runs free for reuse now: those freed at or
// before epoch oldest (the start of the oldest open transaction) by a
// batch at or before durable. It stops at the first that is not, keeping
// the order.
func (f *freeQueue) due(oldest, durable uint64) []run {
	var out []run
	i := 0
	for ; i < len(f.q) && f.q[i].epoch <= oldest && f.q[i].needSeq <= durable; i++ {
		out = append(out, f.q[i].runs...)
	}
	f.q = f.q[i:]
	return out
}
