package namenode

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
)

// batchStore is what the committer writes through: the namenode's store
// (or commit log) and its in-memory state. The committer decides what
// goes into a batch, when to sync and when to answer; batchStore does the
// writing and applying.
type batchStore interface {
	// internal returns the namenode-internal changes queued since the
	// last call; they join the next batch and wait for nobody.
	internal() []*meta.Change
	// write makes changes applied (durable only after sync). An error
	// leaves the store's state unknown.
	write(changes []*meta.Change) error
	// applied makes a written batch visible in memory.
	applied(batch []*commitReq)
	// sync makes everything written so far durable.
	sync() error
	// unsynced is called after a batch that was not synced (to release
	// what waited for transactions that ended meanwhile).
	unsynced()
	// fatal stops the namenode after a store error.
	fatal(err error)
}

// committer turns commit requests into batches: group commit (every
// request queued while a batch is written goes into the next one, up to
// maxBatch), one store write per batch, one sync per batch only if one
// of its commits is durable or a barrier (async commits are answered
// before the sync), and a sync at least every interval and every
// syncCommits async commits.
//
// One goroutine at a time (holding mu) writes batches. A connection
// goroutine submitting a commit becomes that writer when no batch is
// being written: it writes the batch and answers its own client itself,
// so an uncontended commit costs no goroutine hand-off. Otherwise the
// running writer picks the request up; the background goroutine (run)
// writes what is left, the timer's syncs and namenode-internal changes.
//
// Lock discipline: mu is held by the goroutine writing batches and
// guards unsynced; q and kick are channels; failed is atomic. The
// committer never holds Namenode.mu itself: batchStore's methods take it
// as they need.
type committer struct {
	store       batchStore
	interval    time.Duration
	syncCommits int
	q           chan *commitReq
	kick        chan struct{}
	mu          sync.Mutex
	unsyncedN   int           // changes written since the last sync (mu)
	failed      atomic.Bool   // the store failed: nothing more is written
	batches     atomic.Uint64 // batches written
	maxBatch    int
}

func newCommitter(store batchStore, interval time.Duration, syncCommits int) *committer {
	return &committer{store: store, interval: interval, syncCommits: syncCommits,
		q: make(chan *commitReq, 4096), kick: make(chan struct{}, 1), maxBatch: 1024}
}

// halt stops all further writing (the store failed).
func (c *committer) halt() { c.failed.Store(true) }

// poke wakes the background goroutine (never blocks).
func (c *committer) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// submit queues r and, if no batch is being written, writes batches on
// this goroutine (self is the connection it serves, or nil).
func (c *committer) submit(r *commitReq, self *conn) {
	c.q <- r
	if c.mu.TryLock() {
		c.runBatches(self)
		c.mu.Unlock()
	}
	// Queued while we (or another) held the lock and nobody took it since.
	if len(c.q) > 0 {
		c.poke()
	}
}

// run is the background goroutine: the sync timer, leftovers and
// namenode-internal changes, until stop is closed.
func (c *committer) run(stop <-chan struct{}) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		tick := false
		select {
		case <-stop:
			return
		case <-c.kick:
		case <-t.C:
			tick = true
		}
		c.mu.Lock()
		if tick && c.unsyncedN > 0 && !c.failed.Load() {
			if c.sync() {
				c.unsyncedN = 0
			}
		}
		c.runBatches(nil)
		c.mu.Unlock()
	}
}

// runBatches writes batches until the queue is empty. Called with mu held.
func (c *committer) runBatches(self *conn) {
	for !c.failed.Load() {
		var batch []*commitReq
		for _, ch := range c.store.internal() {
			// The commits that depend on them are in this batch or a later one.
			batch = append(batch, &commitReq{change: ch, async: true})
		}
	drain:
		for len(batch) < c.maxBatch {
			select {
			case r := <-c.q:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		if len(batch) == 0 {
			return
		}
		c.writeBatch(batch, self)
	}
}

// writeBatch writes one batch: one store write for all of it, then one
// sync if any commit of the batch (or a barrier) must be durable before it
// is answered. Async commits are answered between the two. Called with mu
// held.
func (c *committer) writeBatch(batch []*commitReq, self *conn) {
	changes := make([]*meta.Change, 0, len(batch))
	durable := false
	for _, r := range batch {
		if r.change != nil {
			changes = append(changes, r.change)
		}
		if !r.async {
			durable = true
		}
	}
	if len(changes) > 0 {
		if err := c.store.write(changes); err != nil {
			// The store's state is unknown now: acknowledge nothing, stop.
			c.halt()
			c.store.fatal(fmt.Errorf("write a batch of %d changes: %w", len(changes), err))
			return
		}
		c.batches.Add(1)
		c.store.applied(batch)
		c.unsyncedN += len(changes)
	}
	for _, r := range batch {
		if r.async {
			r.answer(self)
		}
	}
	if durable || c.unsyncedN >= c.syncCommits {
		if !c.sync() {
			return
		}
		c.unsyncedN = 0
	} else {
		c.store.unsynced()
	}
	for _, r := range batch {
		if !r.async {
			r.answer(self)
		}
	}
}

// sync makes everything written durable; false (and the namenode
// stopped) if the store failed.
func (c *committer) sync() bool {
	if err := c.store.sync(); err != nil {
		c.halt()
		c.store.fatal(fmt.Errorf("sync the metadata store: %w", err))
		return false
	}
	return true
}

// answer answers r: directly when this goroutine serves its connection,
// otherwise through the connection's writer.
func (r *commitReq) answer(self *conn) {
	if r.direct != nil && r.owner != nil && r.owner == self {
		r.direct()
		return
	}
	if r.reply != nil {
		r.reply(nil)
	}
}
