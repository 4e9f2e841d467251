package namenode

import (
	"fmt"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// opFlags are the checks the dispatcher makes before an operation runs,
// once for all operations instead of in each.
type opFlags uint8

const (
	// opOutsideTxn: the operation concerns the connection or a whole
	// transaction (abort, keepalive); q.Txn is not looked up for it.
	opOutsideTxn opFlags = 1 << iota
	// opNeedsTxn: the operation changes metadata and must run in a
	// transaction.
	opNeedsTxn
	// opDatanode: only datanodes may ask (at a security level that
	// identifies them; at level none everybody is unidentified).
	opDatanode
	// opSuperuser: only the superuser may ask (likewise).
	opSuperuser
	// opReachIno: q.Ino, if set, must have a path from the root that the
	// caller may search (inode-addressed access is no back door).
	opReachIno
)

// opHandler runs one operation. Called with n.mu held.
type opHandler func(n *Namenode, c *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error)

// opSpec is an operation's entry in the dispatch table.
type opSpec struct {
	flags opFlags
	run   opHandler
}

// opTable lists every operation of the protocol. Those that wait for the
// store (commit, sync, register, backup) answer themselves, later
// (answersLater).
var opTable map[wire.Op]opSpec

func init() {
	opTable = map[wire.Op]opSpec{
		wire.OpAbort:     {opOutsideTxn, (*Namenode).opAbort},
		wire.OpKeepalive: {opOutsideTxn, (*Namenode).opKeepalive},
		wire.OpPing: {0, func(*Namenode, *conn, *Txn, *auth.Identity, *wire.Request) (*wire.Response, error) {
			return &wire.Response{}, nil
		}},
		wire.OpLookup: {0, (*Namenode).opLookup},
		wire.OpStat:   {opReachIno, (*Namenode).opStat},
		wire.OpReadDir: {opReachIno, func(n *Namenode, _ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return n.readDir(tx, who, q)
		}},
		wire.OpBlocks: {opReachIno, (*Namenode).opBlocks},
		wire.OpGlob:   {0, (*Namenode).opGlob},
		wire.OpFsStat: {0, func(n *Namenode, _ *conn, _ *Txn, _ *auth.Identity, _ *wire.Request) (*wire.Response, error) {
			return n.fsStat(), nil
		}},
		wire.OpPathOf:   {0, (*Namenode).opPathOf},
		wire.OpLeaseDir: {opOutsideTxn, (*Namenode).opLeaseDir},
		wire.OpStats:    {0, (*Namenode).opStats},
		wire.OpNodes: {0, func(n *Namenode, _ *conn, _ *Txn, _ *auth.Identity, _ *wire.Request) (*wire.Response, error) {
			return &wire.Response{Nodes: n.nodeList()}, nil
		}},
		wire.OpHeartbeat: {opDatanode, (*Namenode).opHeartbeat},
		wire.OpFsck: {opSuperuser, func(n *Namenode, c *conn, tx *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return n.fsckPage(tx, q)
		}},
		wire.OpCreate: {opNeedsTxn, (*Namenode).opCreate},
		wire.OpSetAttr: {opNeedsTxn | opReachIno, func(n *Namenode, _ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return n.setAttr(tx, who, q)
		}},
		wire.OpUnlink: {opNeedsTxn, (*Namenode).opUnlink},
		wire.OpRename: {opNeedsTxn, (*Namenode).opRename},
		wire.OpLink:   {opNeedsTxn, (*Namenode).opLink},
		wire.OpAllocate: {opNeedsTxn | opReachIno, func(n *Namenode, _ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return n.allocateOp(tx, who, q)
		}},
		wire.OpExtend: {opNeedsTxn | opReachIno, func(n *Namenode, _ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return n.extendOp(tx, who, q)
		}},
		wire.OpSetBlocks: {opNeedsTxn | opReachIno, func(n *Namenode, _ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return n.setBlocksJournaled(tx, who, q) // journal.go
		}},
		wire.OpDelegate:       {opOutsideTxn, (*Namenode).opDelegate},
		wire.OpNodeAdmin:      {opSuperuser, (*Namenode).opNodeAdmin},
		wire.OpBadBlock:       {opDatanode, (*Namenode).opBadBlock},
		wire.OpReplicaDamaged: {opReachIno, (*Namenode).opReplicaDamaged},
		wire.OpNamenodes:      {0, (*Namenode).opNamenodes}, // group.go
		wire.OpDropReplicas: {opNeedsTxn, func(n *Namenode, _ *conn, tx *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return nil, n.dropReplicas(tx, q.Pref)
		}},
		wire.OpCommit: {opOutsideTxn, func(n *Namenode, c *conn, _ *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return nil, &answersLater{func(id uint64) { n.commit(c, id, q.Txn, q.ReqID, q.Flags, nil) }}
		}},
		wire.OpSync: {opOutsideTxn, func(n *Namenode, c *conn, _ *Txn, _ *auth.Identity, _ *wire.Request) (*wire.Response, error) {
			return nil, &answersLater{func(id uint64) { n.syncBarrier(c, id) }}
		}},
		wire.OpRegister: {opOutsideTxn, func(n *Namenode, c *conn, _ *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return nil, &answersLater{func(id uint64) { n.registerAsync(c, id, q) }}
		}},
		wire.OpBackup: {opOutsideTxn, func(n *Namenode, c *conn, _ *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return nil, &answersLater{func(id uint64) { n.backup(c, id, q) }}
		}},
	}
}

// answersLater is what a handler returns for an operation that waits for
// the store: the RPC server calls run with the request's id once the
// namenode lock is released, and run answers the request itself, now or
// from another goroutine, while the connection's other requests go on.
// Those operations check their callers themselves.
type answersLater struct{ run func(id uint64) }

func (*answersLater) Error() string { return "answered later" }

// handle runs one request: the checks its table entry asks for, then its
// handler. Called with n.mu held.
func (n *Namenode) handle(c *conn, q *wire.Request) (*wire.Response, error) {
	spec, ok := opTable[q.Op]
	if !ok {
		return nil, fail(wire.ErrCodeInvalid, "operation %s not supported", q.Op)
	}
	who := c.who
	if spec.flags&opOutsideTxn != 0 {
		return spec.run(n, c, nil, who, q)
	}
	var tx *Txn
	if q.Txn != 0 {
		var err error
		if tx, err = n.getTxn(c, q.Txn, q.Flags&wire.FlagBegin != 0); err != nil {
			return nil, err
		}
		if tx.committing {
			return nil, fail(wire.ErrCodeTxn, "transaction %d is committing", q.Txn)
		}
	}
	switch {
	case spec.flags&opDatanode != 0 && who != nil && who.Role != auth.RoleDatanode:
		return nil, fail(wire.ErrCodePerm, "%s: only datanodes may ask this", q.Op)
	case spec.flags&opSuperuser != 0 && who != nil && !who.Super():
		return nil, fail(wire.ErrCodePerm, "%s: only the superuser may ask this", q.Op)
	case spec.flags&opReachIno != 0 && q.Ino != 0 && !n.reachable(tx, who, q.Ino):
		return nil, denied(who, fmt.Sprintf("inode %d (no searchable path to it)", q.Ino))
	case spec.flags&opNeedsTxn != 0 && tx == nil:
		return nil, fail(wire.ErrCodeTxn, "%s needs a transaction", q.Op)
	}
	return spec.run(n, c, tx, who, q)
}

// maxBlockIndex bounds file block indices (and with them file sizes), so
// index arithmetic never overflows.
const maxBlockIndex = 1 << 36
