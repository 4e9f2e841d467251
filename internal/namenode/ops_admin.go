package namenode

// Operations on connections and the namenode itself: abort, keepalive,
// counters, datanode heartbeats, filesystem totals.

import (
	"syscall"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// opAbort: aborting a transaction that already ended is not an error, and
// must not begin it again.
func (n *Namenode) opAbort(c *conn, _ *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if tx := n.txns.get(c, q.Txn); tx != nil && !tx.committing {
		n.endTxn(tx, false)
	}
	return &wire.Response{}, nil
}

// opKeepalive: one message per connection keeps all its transactions
// alive however long their client reads without asking the namenode.
func (n *Namenode) opKeepalive(c *conn, _ *Txn, _ *auth.Identity, _ *wire.Request) (*wire.Response, error) {
	now := time.Now()
	for k, tx := range n.txns.all() {
		if k.conn == c {
			tx.lastUse = now
		}
	}
	return &wire.Response{Counters: []uint64{uint64(n.cfg.TxnTimeout), uint64(n.cfg.TicketLifetime)}}, nil
}

// opStats answers the request counters, then the namenode process's CPU
// time (user + system) in ns (0: unknown), then the additions put off by
// directory leases (or the start-up grace), then the fsyncs that made
// commits durable.
func (n *Namenode) opStats(*conn, *Txn, *auth.Identity, *wire.Request) (*wire.Response, error) {
	out := []uint64{n.srv.requests.Load(), n.commits.Load(), n.cm.batches.Load()}
	for i := range n.srv.perOp {
		out = append(out, n.srv.perOp[i].Load())
	}
	var cpu uint64
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu = uint64(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return &wire.Response{Counters: append(out, cpu, n.leases.putOff, n.syncs.Load())}, nil
}

func (n *Namenode) opHeartbeat(c *conn, _ *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Node == nil {
		return nil, fail(wire.ErrCodeInvalid, "heartbeat without node")
	}
	dn := n.nodes.lookup(q.Node.Identity)
	if dn == nil || dn.conn != c {
		return nil, fail(wire.ErrCodeInvalid, "heartbeat from an unregistered datanode")
	}
	dn.alive = true
	dn.lastSeen = time.Now()
	dn.scrub = scrubReport{lastPass: q.Mtime, lastBlocks: q.Count, passed: q.Index}
	revoked := dn.revoked
	dn.revoked = nil
	return &wire.Response{Counters: revoked, Extents: dn.heartbeat(q.Node, uint64(q.Size), q.Extents)}, nil
}

func (n *Namenode) fsStat() *wire.Response {
	var total, used, alive, files, dirs uint64
	for dn := range n.nodes.all() {
		if dn.alive {
			alive++
		}
	}
	// In whole blocks of the datanodes' bytes (space.go), which is what
	// clients multiply by the blocksize; used rounds up.
	capacity, usedBytes := n.nodeBytes()
	bs := uint64(n.cfg.Blocksize)
	total, used = capacity/bs, min(capacity/bs, (usedBytes+bs-1)/bs)
	for _, in := range n.ns.inodes {
		switch in.attr.Type {
		case wire.TypeDir:
			dirs++
		default:
			files++
		}
	}
	// After the totals, the settings a client shows as its effective
	// parameters ('plasma params'): the default replication and the
	// least security level accepted; Paths carries the cluster name.
	return &wire.Response{Counters: []uint64{uint64(n.cfg.Blocksize), total, used, total - used, files, dirs, uint64(n.nodes.count()), alive, uint64(n.txns.count()),
		uint64(n.cfg.DefaultRep), uint64(n.cfg.Security)}, Paths: []string{n.cfg.Cluster}}
}
