package namenode

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
)

// The namenode's side of the RPC server (requestHandler): requests run
// under n.mu through the operation table (ops.go), commits handed to the
// committer.

// handleSafely runs one request under the namenode lock. A panic is
// contained: logged with its stack, answered as an internal error, and the
// namenode keeps serving (the request's own changes stay private to its
// transaction, which the client can abort).
func (n *Namenode) handleSafely(c *conn, q *wire.Request) (resp *wire.Response, err error) {
	n.mu.Lock()
	defer func() {
		if p := recover(); p != nil {
			n.log.Error("panic while serving a request", "op", q.Op, "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, fail(wire.ErrCodeInternal, "internal error while serving %s (logged on the namenode)", q.Op)
		}
		n.mu.Unlock()
	}()
	return n.handle(c, q)
}

// commit queues tx for the committer and answers resp (an empty answer
// when nil) once the commit is durable, or with async once it is applied.
func (n *Namenode) commit(c *conn, id, txID, reqID uint64, flags uint32, resp *wire.Response) {
	async, unsyncedFlag := flags&wire.FlagAsync != 0, flags&wire.FlagUnsyncedData != 0
	if resp == nil {
		resp = &wire.Response{}
	}
	async = async || n.cfg.Relaxed
	if n.cfg.Group != nil {
		// A group acknowledges an async commit once a majority has it,
		// like a durable one: Raft has no state between "proposed" and
		// "in a majority's log", whose writes are durable (group.go).
		async = false
	}
	n.mu.Lock()
	tx := n.txns.get(c, txID)
	if tx == nil || tx.committing {
		n.mu.Unlock()
		// Clients send commit only for transactions they used, so a missing
		// one was aborted (timeout, conflict handling) and must not be
		// reported as committed.
		msg := fmt.Sprintf("transaction %d is not open (aborted or timed out); nothing was committed", txID)
		n.log.Warn("request refused", "op", wire.OpCommit.String(), "code", codeName(wire.ErrCodeTxn), "user", c.user(), "req", wire.FormatReqID(reqID), "err", msg)
		c.send(id, &wire.Response{Code: wire.ErrCodeTxn, Msg: msg})
		return
	}
	if len(tx.inodes) == 0 && len(tx.entries) == 0 && len(tx.blocks) == 0 {
		n.endTxn(tx, true)
		n.mu.Unlock()
		c.send(id, resp)
		return
	}
	var dataNodes map[uint32]*conn
	var dataBlocks []unsyncedBlock
	if unsyncedFlag {
		var err error
		if dataNodes, err = n.unsyncedDataNodes(tx); err != nil {
			n.endTxn(tx, false)
			n.mu.Unlock()
			n.log.Warn("request refused", "op", wire.OpCommit.String(), "code", codeName(wire.ErrCodeUnavailable), "user", c.user(), "req", wire.FormatReqID(reqID), "err", err)
			c.send(id, &wire.Response{Code: wire.ErrCodeUnavailable, Msg: err.Error()})
			return
		}
		dataBlocks = tx.unsyncedBlocks(dataNodes)
	}
	tx.committing = true
	start := time.Now()
	acked := func() {
		took := time.Since(start)
		n.obs.committed(async, took)
		if took > slowRequest {
			n.log.Warn("slow commit", "mode", mode(async), "seconds", took.Seconds(), "user", c.user(), "req", wire.FormatReqID(reqID))
		}
	}
	req := &commitReq{tx: tx, change: n.prepareCommit(tx), async: async, owner: c, dataNodes: dataNodes, dataBlocks: dataBlocks,
		reply:  func(error) { acked(); c.sendAsync(id, resp) },
		direct: func() { acked(); c.send(id, resp) }}
	if unsyncedFlag && !async {
		n.journalCommit(tx, req) // or its datanodes sync before the log fsync
	}
	n.mu.Unlock()
	n.cm.submit(req, c)
}

// syncBarrier answers once everything applied before it is durable.
func (n *Namenode) syncBarrier(c *conn, id uint64) {
	n.cm.submit(&commitReq{owner: c, reply: func(error) { c.sendAsync(id, &wire.Response{}) },
		direct: func() { c.send(id, &wire.Response{}) }}, c)
}

// abortTxn ends c's transaction txID after a compound request's change
// failed: nothing of it remains.
func (n *Namenode) abortTxn(c *conn, txID uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if tx := n.txns.get(c, txID); tx != nil && !tx.committing {
		n.endTxn(tx, false)
	}
}

// connGone aborts the transactions c left open (not those committing)
// and marks the datanodes it served dead.
func (n *Namenode) connGone(c *conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, tx := range n.txns.all() {
		if k.conn == c && !tx.committing {
			n.endTxn(tx, false)
		}
	}
	n.leases.dropConn(c)
	n.connClosed(c)
}
