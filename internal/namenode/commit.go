package namenode

import (
	"context"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

type commitReq struct {
	tx     *Txn         // nil for namenode-internal changes
	change *meta.Change // nil for a sync barrier
	// async: answer once applied; the committer makes it durable within
	// its window (SyncInterval, SyncCommits) or at the next durable
	// commit or barrier, whichever comes first.
	async bool
	// reply answers the client from whichever goroutine commits (through
	// the connection's writer); direct answers it on owner's own
	// goroutine, when that goroutine wrote the batch.
	reply  func(error)
	owner  *conn
	direct func()
	// dataNodes: the datanodes holding its data unsynced, as registered
	// when it got blocks there (FlagUnsyncedData; datasync.go).
	dataNodes map[uint32]*conn
	// dataBlocks: the blocks it wrote there (datasyncstrike.go).
	dataBlocks []unsyncedBlock
	// journal: its journaled writes, pending once applied (journal.go).
	journal []*journalEntry
}

// prepareCommit turns tx's private state into a store change, in the
// store's own types (durable.go). Called with n.mu held; tx must not be
// used for anything else afterwards: applyCommit makes its state visible.
func (n *Namenode) prepareCommit(tx *Txn) *meta.Change {
	c := &meta.Change{}
	now := time.Now().UnixNano()
	for parent := range tx.touched {
		if a, own := tx.inodes[parent]; own {
			a.Mtime, a.Ctime = now, max(a.Ctime, now)
			continue
		}
		// A directory's mtime is raised without a lock (last commit wins);
		// only the mtime, so concurrent attribute changes are not undone.
		if c.Touch == nil {
			c.Touch = map[uint64]int64{}
		}
		c.Touch[parent] = now
	}
	for _, a := range tx.inodes {
		c.PutInodes = append(c.PutInodes, storeInode(a))
	}
	for k, ino := range tx.entries {
		if ino == 0 {
			c.DelEntries = append(c.DelEntries, k)
		} else {
			c.PutEntries = append(c.PutEntries, meta.Entry{EntryKey: k, Ino: ino})
		}
	}
	if len(tx.blocks) > 0 {
		c.Blocks = make(map[uint64][]meta.Extent, len(tx.blocks))
		for ino, xs := range tx.blocks {
			c.Blocks[ino] = storeExtents(xs)
		}
	}
	return c
}

// applyCommit makes a durable change visible in memory and ends tx: the
// attributes and block lists from tx's own state (c holds them in the
// store's types), the rest from c. Called by the committer with n.mu held.
func (n *Namenode) applyCommit(tx *Txn, c *meta.Change) {
	n.fsck.note(c)
	n.repl.note(c)
	n.epoch++
	pf := pendingFree{epoch: n.epoch, needSeq: n.appliedSeq, runs: n.settleAllocations(tx, c)}
	for _, a := range c.PutInodes {
		in := n.ns.inodes[a.Ino]
		if in == nil {
			in = &inode{}
			if a.Type == meta.TypeDir {
				in.entries = map[string]uint64{}
			}
			n.ns.inodes[a.Ino] = in
		}
		in.attr = *tx.inodes[a.Ino]
	}
	for ino, mt := range c.Touch {
		if in := n.ns.inodes[ino]; in != nil && in.attr.Mtime < mt {
			in.attr.Mtime, in.attr.Ctime = mt, max(in.attr.Ctime, mt)
		}
	}
	for _, k := range c.DelEntries {
		if p := n.ns.inodes[k.Parent]; p != nil {
			if old := n.ns.inodes[p.entries[k.Name]]; old != nil {
				old.linkFrom(k.Parent, -1)
				if old.attr.Type == wire.TypeDir {
					p.subdirs--
				}
			}
			delete(p.entries, k.Name)
			p.sorted = nil
		}
	}
	for _, e := range c.PutEntries {
		p := n.ns.inodes[e.Parent]
		if p != nil {
			if old := n.ns.inodes[p.entries[e.Name]]; old != nil {
				old.linkFrom(e.Parent, -1)
				if old.attr.Type == wire.TypeDir {
					p.subdirs--
				}
			} else {
				p.sorted = nil
			}
			p.entries[e.Name] = e.Ino
		}
		if in := n.ns.inodes[e.Ino]; in != nil {
			in.linkFrom(e.Parent, 1)
			if p != nil && in.attr.Type == wire.TypeDir {
				p.subdirs++
			}
		}
	}
	// Directories' link counts follow their subdirectories (also over a
	// private copy of the attributes this commit wrote back).
	for _, a := range c.PutInodes {
		if in := n.ns.inodes[a.Ino]; in != nil {
			in.dirNlink()
		}
	}
	for _, k := range c.DelEntries {
		if p := n.ns.inodes[k.Parent]; p != nil {
			p.dirNlink()
		}
	}
	for _, e := range c.PutEntries {
		if p := n.ns.inodes[e.Parent]; p != nil {
			p.dirNlink()
		}
	}
	for ino, xs := range tx.blocks {
		if in := n.ns.inodes[ino]; in != nil {
			in.blocks = xs
		}
	}
	// Inodes whose last link went away: delete now, or when the last
	// transaction using them ends.
	var dead []uint64
	for _, a := range c.PutInodes {
		in := n.ns.inodes[a.Ino]
		if a.Nlink != 0 || a.Ino == rootIno {
			continue
		}
		others := in.users
		if tx.used[a.Ino] {
			others--
		}
		if others > 0 {
			in.orphan = true
			continue
		}
		dead = append(dead, a.Ino)
		pf.runs = append(pf.runs, extentRuns(in.blocks)...)
		delete(n.ns.inodes, a.Ino)
		delete(tx.used, a.Ino)
	}
	if len(pf.runs) > 0 {
		n.frees.add(pf)
	}
	if len(dead) > 0 {
		// Deleted after the commit is acknowledged; if this is lost in a
		// crash, the nlink-0 rows are removed at the next start-up.
		n.deferChange(&meta.Change{DelInodes: dead})
	}
	n.endTxn(tx, true)
}

// nnStore is the namenode as the committer's batchStore: the store (or
// commit log) and the in-memory state a written batch is applied to.
type nnStore struct{ n *Namenode }

func (s nnStore) internal() []*meta.Change {
	n := s.n
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.deferred
	n.deferred = nil
	n.takeTrimFrees(out)
	return out
}

func (s nnStore) write(changes []*meta.Change) error {
	if g := s.n.cfg.Group; g != nil {
		g.append(changes)
		return nil
	}
	if s.n.ckpt != nil {
		return s.n.ckpt.append(changes)
	}
	return s.n.cfg.Store.Apply(context.Background(), changes)
}

func (s nnStore) applied(batch []*commitReq) {
	n := s.n
	n.mu.Lock()
	defer n.mu.Unlock()
	n.appliedSeq++
	n.obs.batch(batch)
	for _, r := range batch {
		if r.tx == nil {
			delete(n.strikes, r.change) // written: the next sync may make it durable
			continue
		}
		n.applyCommit(r.tx, r.change)
		n.commits.Add(1)
		n.pendDataSync(r)
		n.journalApplied(r)
	}
}

// sync makes every applied batch durable and releases the blocks waiting
// for that.
func (s nnStore) sync() error {
	n := s.n
	n.mu.Lock()
	seq, done := n.appliedSeq, n.durableSeq
	data, blocks := n.takeDataSync()
	striking := len(n.strikes) > 0
	n.mu.Unlock()
	if seq == done {
		return nil // nothing applied since the last sync
	}
	// The datanodes first: the log fsync makes commits durable whose
	// data only these syncs make durable (datasync.go); the replicas of
	// those that failed are struck first (datasyncstrike.go).
	if err := n.syncOrStrike(data, blocks); err != nil {
		return err
	}
	if striking {
		return errSyncAgain // a strike queued by an earlier round is not written yet
	}
	var err error
	start := time.Now()
	if g := n.cfg.Group; g != nil {
		err = g.sync()
	} else if n.ckpt != nil {
		err = n.ckpt.sync()
	} else {
		err = n.cfg.Store.(meta.Syncer).Sync()
	}
	n.obs.fsync(start)
	if err != nil {
		return err
	}
	n.syncs.Add(1)
	n.mu.Lock()
	n.durableSeq = seq
	n.releaseFrees()
	if len(n.journal.entries) > 0 {
		n.kickJournal() // their datanodes may sync now (journal.go)
	}
	n.mu.Unlock()
	return nil
}

func (s nnStore) unsynced() {
	s.n.mu.Lock()
	s.n.releaseFrees() // frees of transactions that ended meanwhile
	s.n.mu.Unlock()
}

func (s nnStore) fatal(err error) { s.n.fatal(err) }

// deferChange queues a namenode-internal change for the committer. Called
// with n.mu held (so it must not block on the commit queue).
func (n *Namenode) deferChange(c *meta.Change) {
	n.deferred = append(n.deferred, c)
	n.cm.poke()
}

// settleAllocations frees at once the blocks tx allocated but does not
// reference at commit (a failed write, a block rewritten twice): nobody else
// ever saw them. It returns the committed blocks tx replaced, which are
// freed only when no older transaction remains.
func (n *Namenode) settleAllocations(tx *Txn, c *meta.Change) []run {
	if len(tx.allocated) == 0 {
		return tx.freed
	}
	type blk struct {
		node uint32
		b    uint64
	}
	mine := map[blk]bool{}
	for node, runs := range tx.allocated {
		for _, r := range runs {
			for b := r.start; b < r.start+r.count; b++ {
				mine[blk{node, b}] = true
			}
		}
	}
	for _, xs := range c.Blocks {
		for _, x := range xs {
			for _, r := range x.Replicas {
				for k := uint64(0); k < uint64(x.Count); k++ {
					delete(mine, blk{r.Node, r.Start + k})
				}
			}
		}
	}
	for k := range mine {
		if dn := n.nodes.get(k.node); dn != nil {
			dn.freeSlots(k.b, 1)
		}
	}
	var out []run
	for _, r := range tx.freed {
		for b := r.start; b < r.start+r.count; b++ {
			if !tx.ownsRun(r.node, b, 1) {
				out = append(out, run{node: r.node, start: b, count: 1})
			}
		}
	}
	return out
}
