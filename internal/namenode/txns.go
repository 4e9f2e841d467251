package namenode

import (
	"iter"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
)

// txnTable is the namenode's transaction manager: the open transactions
// by connection and id, the per-connection limit, and the blocks each
// user holds in uncommitted transactions. Ending a transaction here only
// forgets it; its locks, allocations and users are undone by
// Namenode.endTxn.
//
// Lock discipline: no mutex of its own; guarded by Namenode.mu.
type txnTable struct {
	m         map[txnKey]*Txn
	userAlloc map[string]uint64 // bytes (replicas counted) per user
}

func newTxnTable() *txnTable {
	return &txnTable{m: map[txnKey]*Txn{}, userAlloc: map[string]uint64{}}
}

// get returns c's open transaction id, or nil.
func (t *txnTable) get(c *conn, id uint64) *Txn { return t.m[txnKey{c, id}] }

// open reports whether tx is still open (not ended nor replaced).
func (t *txnTable) open(tx *Txn) bool { return t.m[tx.key] == tx }

// begin opens transaction id of c, begun at epoch by user, unless c
// already has max open.
func (t *txnTable) begin(c *conn, id, epoch uint64, user string, max int) (*Txn, error) {
	if c.ntxns >= max {
		return nil, fail(wire.ErrCodeTxn, "too many open transactions on this connection (limit %d)", max)
	}
	c.ntxns++
	k := txnKey{c, id}
	tx := &Txn{key: k, start: epoch, tag: rand.Uint64() | 1, user: user, lastUse: time.Now()}
	t.m[k] = tx
	return tx, nil
}

// end forgets tx and gives back what it charged to its user.
func (t *txnTable) end(tx *Txn) {
	if tx.allocCount > 0 {
		if t.userAlloc[tx.user] -= tx.allocCount; t.userAlloc[tx.user] == 0 {
			delete(t.userAlloc, tx.user)
		}
	}
	delete(t.m, tx.key)
	tx.key.conn.ntxns--
}

// charge counts n more allocated bytes against tx and its user.
func (t *txnTable) charge(tx *Txn, n uint64) {
	tx.allocCount += n
	t.userAlloc[tx.user] += n
}

// held is the bytes user holds in uncommitted transactions.
func (t *txnTable) held(user string) uint64 { return t.userAlloc[user] }

// all yields the open transactions, in no order; ending one meanwhile is
// allowed.
func (t *txnTable) all() iter.Seq2[txnKey, *Txn] { return maps.All(t.m) }

// count is the number of open transactions.
func (t *txnTable) count() int { return len(t.m) }

// oldestStart is the epoch the oldest open transaction began at, or now
// if none is open.
func (t *txnTable) oldestStart(now uint64) uint64 {
	oldest := now
	for _, tx := range t.m {
		oldest = min(oldest, tx.start)
	}
	return oldest
}
