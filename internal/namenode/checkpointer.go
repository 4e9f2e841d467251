package namenode

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
)

// The checkpointer waits ckptGather for more batches unless
// ckptBatchMin are queued.
const (
	ckptGather   = 20 * time.Millisecond
	ckptBatchMin = 256
)

type ckptBatch struct {
	seq     uint64
	changes []*meta.Change
}

// checkpointer applies batches already in the commit log to the store,
// in the background and in order, several per store transaction, each
// store transaction recording the last log record it holds
// (meta.Change.LogSeq). Nobody waits for it but a backup or a restart of
// the log (wait). A store error stops the namenode (fatal): the log still
// holds what was not applied, and start-up replays it.
//
// Lock discipline: mu guards q, done and stopped; cond signals both new
// batches and progress.
type checkpointer struct {
	store meta.Store
	fatal func(error)

	mu      sync.Mutex
	cond    *sync.Cond
	q       []ckptBatch // logged batches not yet in the store
	done    uint64      // last log record the store holds
	stopped bool
	wg      sync.WaitGroup
}

// newCheckpointer starts a checkpointer for a store that holds the log
// through record done.
func newCheckpointer(store meta.Store, done uint64, fatal func(error)) *checkpointer {
	c := &checkpointer{store: store, fatal: fatal, done: done}
	c.cond = sync.NewCond(&c.mu)
	c.wg.Add(1)
	go c.run()
	return c
}

// queue hands the checkpointer the batch logged as record seq.
func (c *checkpointer) queue(seq uint64, changes []*meta.Change) {
	c.mu.Lock()
	c.q = append(c.q, ckptBatch{seq, changes})
	c.cond.Broadcast()
	c.mu.Unlock()
}

// wait returns once the store holds log record seq (or the checkpointer
// stopped).
func (c *checkpointer) wait(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.done < seq && !c.stopped {
		c.cond.Wait()
	}
}

// stop applies what is queued, then ends the checkpointer.
func (c *checkpointer) stop() {
	c.mu.Lock()
	c.stopped = true
	c.cond.Broadcast()
	c.mu.Unlock()
	c.wg.Wait()
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
			if err := c.store.Apply(context.Background(), append(all, &meta.Change{LogSeq: last})); err != nil {
				c.fatal(fmt.Errorf("checkpoint the commit log into the store: %w", err))
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
