package namenode

import (
	"errors"
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
	// sync makes durable every batch whose write and applied returned
	// before it was called. It may run while the next batches are
	// written and applied on another goroutine (never two syncs at once).
	sync() error
	// unsynced is called after a batch that was not synced (to release
	// what waited for transactions that ended meanwhile).
	unsynced()
	// fatal stops the namenode after a store error.
	fatal(err error)
}

// committer turns commit requests into batches and makes them durable
// in two stages that overlap: group commit with a pipeline.
//
// Writing: one store write per batch (every request queued meanwhile, up
// to maxBatch), applied in memory, async commits answered at once. One
// goroutine at a time (holding mu) writes. A connection goroutine
// submitting a commit becomes that writer when no batch is being written,
// so an uncontended commit costs no goroutine hand-off; otherwise the
// running writer picks the request up. The background goroutine (run)
// writes what is left, the timer's syncs and namenode-internal changes.
//
// Syncing: a written batch's durable commits (and barriers) wait for the
// next sync that starts after their write; one sync covers every batch
// written before it starts, so every commit written while a sync is in
// flight rides on the following one, together. One goroutine at a time
// (holding smu) syncs, while others go on writing: a writer that finds a
// sync in flight leaves its commits waiting and returns; the syncer looks
// for waiting commits after each sync and again after it stops, so none
// is left behind. A connection goroutine syncs at most one round (which
// covers its own commit, written before it) and leaves further rounds to
// the background goroutine, so its own client is not kept waiting for
// others' syncs. Async commits are synced when syncCommits of them are
// unsynced, at the interval, or with the next durable commit.
//
// Before a sync starts, the syncer waits briefly (gather) for the
// connections whose durable commits the previous sync answered, when
// some of them have not committed again yet: they were answered together
// and come back within a round trip of each other, and without the wait
// the first one back would start a sync alone while the others wait a
// whole sync for the next (batches of 1 and N-1 in turn, half the
// commits per fsync). The wait is bounded by half the last sync's
// duration, so it never costs more than the sync it saves; a connection
// that does not come back is forgotten after one such wait, and a single
// client never waits.
//
// Lock discipline: mu is held by the goroutine writing batches, smu by
// the goroutine syncing (it guards lastOwners and syncTook); wmu guards
// waiting, waitingOwners and wantSync and is held only to hand them over. q and kick are channels; failed, written and synced
// are atomic. The committer never holds Namenode.mu itself: batchStore's
// methods take it as they need.
type committer struct {
	store       batchStore
	interval    time.Duration
	syncCommits int
	q           chan *commitReq
	kick        chan struct{}
	mu          sync.Mutex // held while writing batches
	smu         sync.Mutex // held while syncing
	wmu         sync.Mutex
	waiting     []*commitReq // written, answered after the next sync (wmu)
	wantSync    bool         // a sync is due without a waiting commit (wmu)
	// waitingOwners are the connections of waiting (wmu); arrived is
	// signalled when one is added. lastOwners are the connections the
	// last sync answered, syncTook how long it took (smu).
	waitingOwners map[*conn]bool
	arrived       chan struct{}
	lastOwners    map[*conn]bool
	syncTook      time.Duration
	maxGather     time.Duration // bounds the wait before a sync, whatever syncs take
	written       atomic.Uint64 // changes written
	synced        atomic.Uint64 // changes written before the last sync started
	failed        atomic.Bool   // the store failed: nothing more is written
	batches       atomic.Uint64 // batches written
	maxBatch      int
}

func newCommitter(store batchStore, interval time.Duration, syncCommits int) *committer {
	return &committer{store: store, interval: interval, syncCommits: syncCommits,
		q: make(chan *commitReq, 4096), kick: make(chan struct{}, 1), maxBatch: 1024,
		waitingOwners: map[*conn]bool{}, arrived: make(chan struct{}, 1), maxGather: 2 * time.Millisecond}
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
// this goroutine (self is the connection it serves, or nil), then syncs
// them unless a sync is in flight.
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
	c.syncWaiting(self)
}

// run is the background goroutine: the sync timer, leftovers and
// namenode-internal changes, until stop is closed.
func (c *committer) run(stop <-chan struct{}) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-c.kick:
		case <-t.C:
			if c.written.Load() > c.synced.Load() {
				c.await(nil, true)
			}
		}
		c.mu.Lock()
		c.runBatches(nil)
		c.mu.Unlock()
		c.syncWaiting(nil)
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

// writeBatch writes one batch with one store write, answers its async
// commits and leaves its durable ones (and barriers) waiting for the next
// sync. Called with mu held.
func (c *committer) writeBatch(batch []*commitReq, self *conn) {
	changes := make([]*meta.Change, 0, len(batch))
	var durable []*commitReq
	for _, r := range batch {
		if r.change != nil {
			changes = append(changes, r.change)
		}
		if !r.async {
			durable = append(durable, r)
		}
	}
	if unsyncedData(batch) {
		// Written only while no sync runs, which would make it durable
		// without having its datanodes sync first (datasync.go).
		c.smu.Lock()
		defer func() {
			c.smu.Unlock()
			c.poke() // a syncer that found smu taken left its work to run
		}()
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
		c.written.Add(uint64(len(changes)))
	}
	for _, r := range batch {
		if r.async {
			r.answer(self)
		}
	}
	due := c.written.Load()-c.synced.Load() >= uint64(c.syncCommits)
	if len(durable) > 0 || due {
		c.await(durable, due)
	} else {
		c.store.unsynced()
	}
}

// await leaves written requests waiting for the next sync (and asks for
// one even if none waits, with due).
func (c *committer) await(rs []*commitReq, due bool) {
	c.wmu.Lock()
	c.waiting = append(c.waiting, rs...)
	c.wantSync = c.wantSync || due
	for _, r := range rs {
		if r.owner != nil {
			c.waitingOwners[r.owner] = true
		}
	}
	c.wmu.Unlock()
	select {
	case c.arrived <- struct{}{}:
	default:
	}
}

// syncDue tells whether a sync is waited for.
func (c *committer) syncDue() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return (len(c.waiting) > 0 || c.wantSync) && !c.failed.Load()
}

// takeWaiting hands the syncer what waits for a sync.
func (c *committer) takeWaiting() (rs []*commitReq, due bool) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	rs, due = c.waiting, c.wantSync
	c.waiting, c.wantSync = nil, false
	clear(c.waitingOwners)
	return rs, due
}

// gather waits until every connection the last sync answered has a
// commit waiting again, or half the last sync's duration passed (see
// committer). Called with smu held.
func (c *committer) gather() {
	if len(c.lastOwners) < 2 {
		return
	}
	var timeout <-chan time.Time
	for !c.failed.Load() && c.missing() {
		if timeout == nil {
			d := min(c.syncTook/2, c.maxGather)
			if d <= 0 {
				return
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-c.arrived:
		case <-timeout:
			return
		}
	}
}

// missing tells whether a connection the last sync answered has no
// commit waiting. Called with smu held.
func (c *committer) missing() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for o := range c.lastOwners {
		if !c.waitingOwners[o] {
			return true
		}
	}
	return false
}

// syncWaiting syncs and answers what waits, round after round, unless
// another goroutine is syncing: that one looks again after each round and
// after it stops, so it takes over what waits now. A connection's
// goroutine (self) syncs one round and leaves the rest to the background
// goroutine; it leaves all of it when its connection has further
// requests read already, so that their commits are written while the
// sync runs and share the next one (a connection's requests are handled
// one after another by its goroutine: one that syncs, a whole fsync per
// commit, would serialize a client's concurrent commits).
func (c *committer) syncWaiting(self *conn) {
	if self != nil && self.moreRequests() {
		if c.syncDue() {
			c.poke()
		}
		return
	}
	for c.syncDue() && c.smu.TryLock() {
		for !c.failed.Load() && c.syncDue() {
			c.gather()
			if c.failed.Load() {
				break
			}
			rs, due := c.takeWaiting()
			if len(rs) == 0 && !due {
				break
			}
			// Everything written so far is covered by the sync that
			// starts now, including the batches rs were written in.
			w := c.written.Load()
			start := time.Now()
			ok, again := c.sync()
			if again {
				// Nothing was made durable: rs wait for the round after the
				// changes the store queued are written (background goroutine).
				c.await(rs, due)
				c.smu.Unlock()
				c.poke()
				return
			}
			if !ok {
				break
			}
			c.syncTook = time.Since(start)
			c.synced.Store(w)
			clear(c.lastOwners)
			for _, r := range rs {
				if r.owner != nil {
					if c.lastOwners == nil {
						c.lastOwners = map[*conn]bool{}
					}
					c.lastOwners[r.owner] = true
				}
				r.answer(self)
			}
			if self != nil {
				c.smu.Unlock()
				if c.syncDue() {
					c.poke()
				}
				return
			}
		}
		c.smu.Unlock()
	}
}

// sync makes everything written durable; false (and the namenode
// stopped) if the store failed; again if it made nothing durable and must
// run once more after the changes it queued are written (errSyncAgain).
func (c *committer) sync() (ok, again bool) {
	if err := c.store.sync(); err != nil {
		if errors.Is(err, errSyncAgain) {
			return false, true
		}
		c.halt()
		c.store.fatal(fmt.Errorf("sync the metadata store: %w", err))
		return false, false
	}
	return true, false
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
