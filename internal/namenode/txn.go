package namenode

import (
	"time"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

type txnKey struct {
	conn *conn
	id   uint64
}

// Txn is one open transaction. Its fields are guarded by Namenode.mu.
type Txn struct {
	key        txnKey
	tag        uint64          // names the transaction in its datanode tickets
	ticketed   map[uint32]bool // datanodes that got tickets of this transaction
	start      uint64          // epoch when the transaction began
	lastUse    time.Time
	committing bool

	inodes     map[uint64]*wire.Attr    // created or modified inodes (private copies)
	entries    map[meta.EntryKey]uint64 // changed entries; 0 means removed
	blocks     map[uint64][]wire.Extent // new block lists of written files
	seen       map[uint64]seenVersion   // block lists handed out: repeatable until the end
	parents    map[uint64]uint64        // moved directories → new parent
	touched    map[uint64]bool          // directories whose mtime the commit updates
	used       map[uint64]bool          // inodes this transaction counts as a user of
	seqSeen    map[uint64]uint64        // data version of each file when tx first saw it
	locks      []lockKey
	allocated  map[uint32][]run // blocks allocated by this transaction
	extended   []run            // committed blocks this transaction may extend in place (count 1)
	dataNodes  map[uint32]*conn // datanodes it got blocks on, as registered then (datasync.go)
	user       string           // who began it ("" at security level none)
	allocCount uint64           // bytes (replicas counted) allocated, charged to user
	freed      []run            // blocks dropped from block lists

	journal []meta.JournalWrite // small writes the commit may journal (journal.go)
}

// seenVersion is the committed version of a file a transaction read: its
// block list and the size that goes with it, handed out together.
type seenVersion struct {
	blocks []wire.Extent
	size   int64
}

// setParent records that tx moved (or made) directory dir into parent.
func (tx *Txn) setParent(dir, parent uint64) {
	if tx.parents == nil {
		tx.parents = map[uint64]uint64{}
	}
	tx.parents[dir] = parent
}

// setBlocks records ino's new block list in tx.
func (tx *Txn) setBlocks(ino uint64, xs []wire.Extent) {
	if tx.blocks == nil {
		tx.blocks = map[uint64][]wire.Extent{}
	}
	tx.blocks[ino] = xs
}

// getTxn returns the open transaction id of c. A transaction exists only
// from a request that begins it (FlagBegin) until it commits, aborts or
// times out; any other request naming an unknown id is refused, so a
// transaction that was aborted behind its client's back can never go on as
// a new one and commit only its later half.
func (n *Namenode) getTxn(c *conn, id uint64, begin bool) (*Txn, error) {
	if tx := n.txns.get(c, id); tx != nil {
		tx.lastUse = time.Now()
		return tx, nil
	}
	if !begin {
		return nil, fail(wire.ErrCodeTxn, "transaction %d is not open (it ended, was aborted after being idle, or was never begun); nothing of it was or will be committed", id)
	}
	user := ""
	if c.who != nil {
		user = c.who.User
	}
	return n.txns.begin(c, id, n.epoch, user, n.cfg.MaxTxnsPerConn)
}

// The namenode's lock calls: the lock table plus, at release, the
// directory-move lock, which is the namenode's own.
func (n *Namenode) lockShared(tx *Txn, ino uint64) error { return n.locks.shared(tx, inodeKey(ino)) }
func (n *Namenode) lockInode(tx *Txn, ino uint64) error  { return n.locks.exclusive(tx, inodeKey(ino)) }
func (n *Namenode) lockEntry(tx *Txn, parent uint64, name string) error {
	return n.locks.exclusive(tx, entryKey(parent, name))
}

func (n *Namenode) releaseLocks(tx *Txn) {
	n.locks.releaseAll(tx)
	if n.renameLock == tx {
		n.renameLock = nil
	}
}

// endTxn ends tx: on abort its allocations return to the free maps.
// Called with n.mu held; the committer calls it with commit=true after the
// changes are applied.
func (n *Namenode) endTxn(tx *Txn, committed bool) {
	n.settleTxn(tx, committed)
	if !committed {
		for node, runs := range tx.allocated {
			if dn := n.nodes.get(node); dn != nil {
				for _, r := range runs {
					dn.freeSlots(r.start, r.count)
				}
			}
		}
	}
	n.releaseLocks(tx)
	n.txns.end(tx)
	// Its tickets die with it: datanodes learn the tag with their next
	// heartbeat.
	for node := range tx.ticketed {
		if dn := n.nodes.get(node); dn != nil {
			dn.revoked = append(dn.revoked, tx.tag)
		}
	}
	var gone []uint64
	for ino := range tx.used {
		in := n.ns.inodes[ino]
		if in == nil {
			continue
		}
		in.users--
		if in.users == 0 && in.orphan {
			gone = append(gone, ino)
		}
	}
	if len(gone) > 0 {
		n.deleteOrphans(gone)
	}
	n.releaseFrees()
}

// deleteOrphans removes unlinked inodes whose last user ended.
func (n *Namenode) deleteOrphans(inos []uint64) {
	n.epoch++
	// The commit that unlinked them is applied (in a batch ≤ appliedSeq);
	// once it is durable the blocks are free for good: the deletion itself
	// need not be, as a restart deletes inodes with no links.
	pf := pendingFree{epoch: n.epoch, needSeq: n.appliedSeq}
	for _, ino := range inos {
		in := n.ns.inodes[ino]
		pf.runs = append(pf.runs, extentRuns(in.blocks)...)
		delete(n.ns.inodes, ino)
	}
	n.frees.add(pf)
	// Not acknowledged to anyone: a crash before this is durable leaves
	// nlink-0 inodes, which the next start-up deletes.
	n.deferChange(&meta.Change{DelInodes: inos})
}

// releaseFrees returns freed blocks to the allocator once no open
// transaction began before they were freed and the change that freed them
// is durable (reused earlier, a power cut could bring back the freeing
// commit's victim with another file's data in its blocks).
func (n *Namenode) releaseFrees() {
	if n.frees.empty() {
		return
	}
	oldest := n.txns.oldestStart(n.epoch + 1)
	for _, r := range n.frees.due(oldest, n.durableSeq) {
		if dn := n.nodes.get(r.node); dn != nil {
			dn.freeSlots(r.start, r.count)
		}
	}
}

func extentRuns(xs []wire.Extent) []run {
	var out []run
	for _, x := range xs {
		for _, r := range x.Replicas {
			out = append(out, run{node: r.Node, start: r.Start, count: uint64(x.Count)})
		}
	}
	return out
}
