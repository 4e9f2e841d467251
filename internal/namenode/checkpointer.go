package namenode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/commitlog"
	"github.com/plasmafs/plasma/internal/meta"
)

// The checkpointer waits ckptGather for more batches unless
// ckptBatchMin are queued.
const (
	ckptGather   = 20 * time.Millisecond
	ckptBatchMin = 256
	// A store that is unavailable (meta.ErrUnavailable) is retried after
	// ckptRetryMin, doubling up to ckptRetryMax.
	ckptRetryMin = 50 * time.Millisecond
	ckptRetryMax = 5 * time.Second
)

// errCheckpointAbandoned: the checkpointer was stopped while the store
// was unavailable; the log keeps what it lacks.
var errCheckpointAbandoned = errors.New("stopped while the metadata store was unavailable")

// errCheckpointStopped: the checkpointer stopped (a store error) before
// the store held what was waited for; the log still holds it.
var errCheckpointStopped = errors.New("the checkpointer stopped before the store held every logged batch")

type ckptBatch struct {
	seq     uint64
	changes []*meta.Change
}

// checkpointer owns the commit log and applies what is logged to the
// store: the committer appends each batch to the log (append) and makes
// the log durable (sync); in the background, in order, several batches
// per store transaction, the checkpointer applies them to the store, each
// store transaction recording the last log record it holds
// (meta.Change.LogSeq). Once the log holds limit bytes, the next append
// first waits until the store holds every logged batch, makes the store
// durable and only then starts the log over (there, not in sync: a sync
// may run while the next batch is appended, and the log must not start
// over under a batch appended after the store was waited for). Nobody else
// waits for it but a backup (wait).
// A store that is unavailable (its server stopped or restarting, the
// connection cut: meta.ErrUnavailable) is retried with backoff, the same
// batch again (Apply is idempotent): commits go on being acknowledged
// from the log meanwhile, until the log is full (the append that would
// start it over then waits for the store). Any other store error stops
// the namenode (fatal) and the checkpointer: the store's state is unknown;
// the log keeps what was not applied (it is never restarted after that),
// and start-up replays it.
//
// Lock discipline: log is appended to (and started over) by the
// committer's writing goroutine only, synced by its syncing goroutine
// only, possibly at the same time (commitlog.Log allows that), and closed
// by close after the committer stopped. mu guards q, last,
// done and stopped; cond signals both new batches and progress.
type checkpointer struct {
	log    *commitlog.Log
	limit  int64 // start the log over once it holds this many bytes
	store  meta.Store
	fatal  func(error)
	logger *slog.Logger
	quit   chan struct{} // closed by stop: a retry's wait ends
	once   sync.Once

	// carry, if set, returns what a log that starts over must hold again
	// (the journaled writes not yet synced on their datanodes, journal.go;
	// nil: nothing); set before the first append.
	carry func() *meta.Change

	mu      sync.Mutex
	cond    *sync.Cond
	q       []ckptBatch // logged batches not yet in the store
	last    uint64      // last log record queued
	done    uint64      // last log record the store holds
	stopped bool
	wg      sync.WaitGroup
}

// newCheckpointer starts a checkpointer for log and a store that holds
// the log through record done.
func newCheckpointer(log *commitlog.Log, limit int64, store meta.Store, done uint64, fatal func(error), logger *slog.Logger) *checkpointer {
	if limit == 0 {
		limit = defaultLogSize
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &checkpointer{log: log, limit: limit, store: store, fatal: fatal, logger: logger, quit: make(chan struct{}), last: done, done: done}
	c.cond = sync.NewCond(&c.mu)
	c.wg.Add(1)
	go c.run()
	return c
}

// append writes a batch to the log (applied, not yet durable) and queues
// it for the store, starting the log over first once it is large. Called
// by the committer's writing goroutine only.
func (c *checkpointer) append(changes []*meta.Change) error {
	if err := c.restart(); err != nil {
		return err
	}
	seq, err := c.log.Append(meta.EncodeChanges(changes))
	if err != nil {
		return err
	}
	c.queue(seq, changes)
	return nil
}

// queue hands the checkpointer the batch logged as record seq.
func (c *checkpointer) queue(seq uint64, changes []*meta.Change) {
	c.mu.Lock()
	c.q = append(c.q, ckptBatch{seq, changes})
	c.last = seq
	c.cond.Broadcast()
	c.mu.Unlock()
}

// sync makes every batch appended before it was called durable in the
// log. Called by the committer's syncing goroutine only.
func (c *checkpointer) sync() error { return c.log.Sync() }

// restart starts the log over once it holds limit bytes: the store must
// first hold, durably, everything in it (so the batches appended but not
// yet synced in the log are durable too).
func (c *checkpointer) restart() error {
	if c.log.Used() < c.limit {
		return nil
	}
	if err := c.waitAll(); err != nil {
		return fmt.Errorf("restart the commit log: %w", err)
	}
	if err := c.store.(meta.Syncer).Sync(); err != nil {
		return fmt.Errorf("sync the store before restarting the commit log: %w", err)
	}
	if err := c.log.Reset(); err != nil {
		return err
	}
	if c.carry == nil {
		return nil
	}
	if ch := c.carry(); ch != nil {
		seq, err := c.log.Append(meta.EncodeChanges([]*meta.Change{ch}))
		if err != nil {
			return fmt.Errorf("carry journaled writes into the restarted commit log: %w", err)
		}
		// Durable before anything else overwrites the old log's records
		// (Reset is lazy): a torn first record would end the old chain.
		if err := c.log.Sync(); err != nil {
			return fmt.Errorf("sync journaled writes carried into the restarted commit log: %w", err)
		}
		c.queue(seq, []*meta.Change{ch})
	}
	return nil
}

// waitAll returns once the store holds every batch queued so far, or
// errCheckpointStopped if it never will.
func (c *checkpointer) waitAll() error {
	c.mu.Lock()
	seq := c.last
	c.mu.Unlock()
	return c.wait(seq)
}

// wait returns once the store holds log record seq, or
// errCheckpointStopped if the checkpointer stopped short of it.
func (c *checkpointer) wait(seq uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.done < seq && !c.stopped {
		c.cond.Wait()
	}
	if c.done < seq {
		return errCheckpointStopped
	}
	return nil
}

// stop applies what is queued (unless a store error stopped it already),
// then ends the checkpointer.
func (c *checkpointer) stop() {
	c.once.Do(func() { close(c.quit) })
	c.mu.Lock()
	c.stopped = true
	c.cond.Broadcast()
	c.mu.Unlock()
	c.wg.Wait()
}

// close stops the checkpointer and closes the log. Called once the
// committer stopped.
func (c *checkpointer) close() error {
	c.stop()
	if c.log == nil {
		return nil // a group member's: the Raft log is the group's (group.go)
	}
	return c.log.Close()
}

// apply applies one batch of logged changes to the store, retrying while
// the store is unavailable, until it succeeds, fails otherwise, or the
// checkpointer is stopped (errCheckpointAbandoned).
func (c *checkpointer) apply(changes []*meta.Change) error {
	wait := ckptRetryMin
	for failures := 0; ; failures++ {
		err := c.store.Apply(context.Background(), changes)
		if err == nil {
			if failures > 0 {
				c.logger.Info("metadata store available again: checkpointing the commit log into it", "failed attempts", failures)
			}
			return nil
		}
		if !errors.Is(err, meta.ErrUnavailable) {
			return err
		}
		if failures == 0 {
			c.logger.Warn("metadata store unavailable: commits go on into the commit log; retrying the checkpoint", "err", err)
		} else {
			c.logger.Debug("metadata store still unavailable", "err", err, "retry in", wait)
		}
		select {
		case <-c.quit:
			return errCheckpointAbandoned
		case <-time.After(wait):
		}
		wait = min(2*wait, ckptRetryMax)
	}
}

func (c *checkpointer) run() {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		for len(c.q) == 0 && !c.stopped {
			c.cond.Wait()
		}
		if len(c.q) < ckptBatchMin && !c.stopped {
			// Let batches gather: one larger store transaction costs far
			// less CPU than many small ones, and nobody waits for it.
			c.mu.Unlock()
			time.Sleep(ckptGather)
			c.mu.Lock()
		}
		q := c.q
		c.q = nil
		stop := c.stopped
		c.mu.Unlock()
		if len(q) > 0 {
			var all []*meta.Change
			for _, b := range q {
				all = append(all, b.changes...)
			}
			last := q[len(q)-1].seq
			if err := c.apply(append(all, &meta.Change{LogSeq: last})); err != nil {
				if !errors.Is(err, errCheckpointAbandoned) {
					c.fatal(fmt.Errorf("checkpoint the commit log into the store: %w", err))
				}
				c.mu.Lock()
				c.stopped = true // nothing more is applied; waiters return
				c.cond.Broadcast()
				c.mu.Unlock()
				return
			}
			c.mu.Lock()
			c.done = last
			c.cond.Broadcast()
			c.mu.Unlock()
		}
		if stop && len(q) == 0 {
			return
		}
	}
}
