package namenode

import (
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
)

// BlockHealth counts the blocks that need an operator's attention, for the
// status page and /metrics.
type BlockHealth struct {
	// UnderReplicated: blocks with fewer replicas on live datanodes than
	// their file's replication.
	UnderReplicated uint64
	// Damaged: replicas reported damaged (a failed checksum), when
	// DamagedKnown: something reports damage to this namenode.
	Damaged      uint64
	DamagedKnown bool
	At           time.Time     // when the count was made (zero: not yet)
	Took         time.Duration // how long making it took
}

// blockHealthSource makes BlockHealth. The namenode's own is healthScan,
// a walk of every file at a bounded rate; a re-replication queue that
// knows the under-replicated and damaged blocks as they change can take
// its place (Namenode.health) and feed the same page and metrics.
type blockHealthSource interface {
	blockHealth() BlockHealth
}

// healthScan walks every file in pages, each under the namenode lock
// for a bounded number of inodes, pausing between pages, and publishes
// the count at the end of each pass. Passes start at most every
// healthScanEvery, and never take more than a 1/healthScanDuty share of
// the time.
type healthScan struct {
	n    *Namenode
	last atomic.Pointer[BlockHealth]
}

// The scan's pace (variables for tests).
var (
	healthScanEvery = 5 * time.Second
	healthScanDuty  = 20                     // a pass waits 20 times its own length before the next
	healthScanPage  = 4096                   // inode numbers probed per lock hold
	healthScanPause = 500 * time.Microsecond // between pages
)

func (h *healthScan) blockHealth() BlockHealth {
	if b := h.last.Load(); b != nil {
		return *b
	}
	return BlockHealth{}
}

// run makes passes until stop is closed.
func (h *healthScan) run(stop <-chan struct{}) {
	for {
		start := time.Now()
		under, ok := h.pass(stop)
		if !ok {
			return
		}
		took := time.Since(start)
		h.last.Store(&BlockHealth{UnderReplicated: under, At: start, Took: took})
		t := time.NewTimer(max(healthScanEvery, time.Duration(healthScanDuty)*took))
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// pass counts the under-replicated blocks of every file; ok is false if
// stop was closed meanwhile.
func (h *healthScan) pass(stop <-chan struct{}) (under uint64, ok bool) {
	n := h.n
	for from := uint64(1); ; from += uint64(healthScanPage) {
		n.mu.Lock()
		end := n.inos.next
		for ino := from; ino < from+uint64(healthScanPage) && ino < end; ino++ {
			if in := n.ns.inodes[ino]; in != nil && in.attr.Type == wire.TypeFile {
				under += n.underReplicated(in)
			}
		}
		n.mu.Unlock()
		if from+uint64(healthScanPage) >= end {
			return under, true
		}
		t := time.NewTimer(healthScanPause)
		select {
		case <-stop:
			t.Stop()
			return 0, false
		case <-t.C:
		}
	}
}

// underReplicated counts the blocks of in with fewer replicas on live
// datanodes than its replication. Called with n.mu held.
func (n *Namenode) underReplicated(in *inode) uint64 {
	var under uint64
	for _, x := range in.blocks {
		live := 0
		for _, r := range x.Replicas {
			if dn := n.nodes.get(r.Node); dn != nil && dn.alive {
				live++
			}
		}
		if live < int(in.attr.Rep) {
			under += uint64(x.Count)
		}
	}
	return under
}
