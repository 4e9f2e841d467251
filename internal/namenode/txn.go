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
	user       string           // who began it ("" at security level none)
	allocCount uint64           // blocks (replicas counted) allocated, charged to user
	freed      []run            // blocks dropped from block lists
}

// seenVersion is the committed version of a file a transaction read: its
// block list and the size that goes with it, handed out together.
type seenVersion struct {
	blocks []wire.Extent
	size   int64
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

// use records tx as a user of ino, so an unlink does not delete it while
// tx may still read it.
func (n *Namenode) use(tx *Txn, ino uint64) {
	if tx.used[ino] {
		return
	}
	in := n.inodes[ino]
	if in == nil {
		return
	}
	if tx.used == nil {
		tx.used = map[uint64]bool{}
		tx.seqSeen = map[uint64]uint64{}
	}
	tx.used[ino] = true
	tx.seqSeen[ino] = in.attr.Seq
	in.users++
}

// attr returns ino's attributes as tx sees them (nil if missing).
func (n *Namenode) attr(tx *Txn, ino uint64) *wire.Attr {
	if tx != nil {
		if a := tx.inodes[ino]; a != nil {
			return a
		}
	}
	if in := n.inodes[ino]; in != nil && (in.attr.Nlink > 0 || ino == rootIno || tx != nil && tx.used[ino]) {
		return &in.attr
	}
	return nil
}

// mutAttr locks ino for tx and returns its private, modifiable attributes.
func (n *Namenode) mutAttr(tx *Txn, ino uint64) (*wire.Attr, error) {
	if a := tx.inodes[ino]; a != nil {
		return a, nil
	}
	in := n.inodes[ino]
	if in == nil {
		return nil, errNotFound
	}
	if err := n.lockInode(tx, ino); err != nil {
		return nil, err
	}
	// First committer wins: a file whose data changed since this
	// transaction read it cannot be written by it (no lost updates).
	if seq, ok := tx.seqSeen[ino]; ok && seq != in.attr.Seq {
		return nil, errConflict
	}
	a := in.attr
	if tx.inodes == nil {
		tx.inodes = map[uint64]*wire.Attr{}
	}
	tx.inodes[ino] = &a
	n.use(tx, ino)
	return &a, nil
}

// entry returns the inode a name refers to as tx sees it (0 if none).
func (n *Namenode) entry(tx *Txn, parent uint64, name string) uint64 {
	if tx != nil {
		if ino, ok := tx.entries[meta.EntryKey{Parent: parent, Name: name}]; ok {
			return ino
		}
	}
	if in := n.inodes[parent]; in != nil && in.entries != nil {
		return in.entries[name]
	}
	return 0
}

func (n *Namenode) setEntry(tx *Txn, parent uint64, name string, ino uint64) {
	if tx.entries == nil {
		tx.entries = map[meta.EntryKey]uint64{}
	}
	tx.entries[meta.EntryKey{Parent: parent, Name: name}] = ino
	if tx.touched == nil {
		tx.touched = map[uint64]bool{}
	}
	tx.touched[parent] = true
}

// list returns the entries of directory ino as tx sees them.
func (n *Namenode) list(tx *Txn, ino uint64) map[string]uint64 {
	out := map[string]uint64{}
	if in := n.inodes[ino]; in != nil {
		for k, v := range in.entries {
			out[k] = v
		}
	}
	if tx != nil {
		for k, v := range tx.entries {
			if k.Parent != ino {
				continue
			}
			if v == 0 {
				delete(out, k.Name)
			} else {
				out[k.Name] = v
			}
		}
	}
	return out
}

// blockList returns ino's block list as tx sees it. The committed list,
// once handed to tx, stays the same until tx ends.
func (n *Namenode) blockList(tx *Txn, ino uint64) []wire.Extent {
	xs, _ := n.fileVersion(tx, ino)
	return xs
}

// ownAttr returns tx's private attributes of ino, if it changed or
// created it (tx may be nil).
func (tx *Txn) ownAttr(ino uint64) *wire.Attr {
	if tx == nil {
		return nil
	}
	return tx.inodes[ino]
}

// fileVersion returns ino's block list and the size of the same version,
// as tx sees them: its own uncommitted version, or the committed one it
// first read (repeatable until tx ends).
func (n *Namenode) fileVersion(tx *Txn, ino uint64) ([]wire.Extent, int64) {
	if tx != nil {
		if a, own := tx.inodes[ino]; own {
			if xs, ok := tx.blocks[ino]; ok {
				return xs, a.Size
			}
			if v, ok := tx.seen[ino]; ok {
				return v.blocks, a.Size
			}
		}
		if v, ok := tx.seen[ino]; ok {
			return v.blocks, v.size
		}
	}
	in := n.inodes[ino]
	if in == nil {
		if a := tx.ownAttr(ino); a != nil {
			return nil, a.Size // created by tx, no blocks yet
		}
		return nil, 0
	}
	if tx != nil {
		if tx.seen == nil {
			tx.seen = map[uint64]seenVersion{}
		}
		tx.seen[ino] = seenVersion{blocks: in.blocks, size: in.attr.Size}
		n.use(tx, ino)
		if a, own := tx.inodes[ino]; own {
			return in.blocks, a.Size
		}
	}
	return in.blocks, in.attr.Size
}

// endTxn ends tx: on abort its allocations return to the free maps.
// Called with n.mu held; the committer calls it with commit=true after the
// changes are applied.
func (n *Namenode) endTxn(tx *Txn, committed bool) {
	if !committed {
		for node, runs := range tx.allocated {
			if dn := n.nodes.get(node); dn != nil {
				for _, r := range runs {
					dn.used.clear(r.start, r.count)
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
		in := n.inodes[ino]
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
		in := n.inodes[ino]
		pf.runs = append(pf.runs, extentRuns(in.blocks)...)
		delete(n.inodes, ino)
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
			dn.used.clear(r.start, r.count)
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
