package namenode

// Journaled small appends (issue 27 item 1; docs/design.md, "Journaled
// small appends").
//
// A durable commit used to wait for two durability points in sequence:
// the datanodes' fdatasync of its data, then the commit log's fsync. A
// commit whose only data is small in-place extensions (wire.JournalWrite,
// at most wire.MaxJournalBytes) may instead carry those bytes: the
// namenode checks them against the block list (the extension's base
// checksum plus the bytes give the committed checksum), writes them into
// the commit's log record (meta.Change.Journal, log format 3), and the
// log's one fsync makes the data durable with the commit. The datanodes
// hold the bytes unsynced (the client wrote them, Extend); each journaled
// write stays pending here, per replica, until that replica's datanode
// has synced after it (the settler, in the background, batched), and the
// commit log is not started over without carrying the pending writes
// into the new log (journalCarry).
//
// A datanode that registers again (a restart may have lost what it had
// not synced; so may a namenode restart, which reloads every journaled
// write of its log as pending) gets its pending writes in the answer to
// its registration and applies them before it counts as registered
// (datanode.BlockStore.ApplyJournal): only writes whose block is still
// the file's at that index, of the same allocation generation, and
// within the file's length, so a slot freed and reused since is never
// written. Readers are protected by the checksums in any case: a replica
// that lost the bytes fails its check and the reader takes another.
//
// Anything else falls back to the deferred data sync (datasync.go): the
// namenode has the datanodes sync before the log fsync. That covers a
// commit that also wrote whole blocks, a namenode without a commit log
// (its store is the durability point and keeps no journal) and a
// namenode group (whose followers would have to replay journaled writes
// after a failover; not built).

import (
	"slices"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/blockcrc"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// journalSettleDelay gathers journaled writes for one background sync
// of their datanodes: a sync per commit would compete with the log's
// fsyncs for the disk.
const journalSettleDelay = 50 * time.Millisecond

// journalSettle is how long the settler waits to gather writes.
func (n *Namenode) journalSettle() time.Duration {
	if n.cfg.JournalSettle > 0 {
		return n.cfg.JournalSettle
	}
	return journalSettleDelay
}

// journalEntry is a journaled write not yet known durable on every
// replica.
type journalEntry struct {
	w meta.JournalWrite
	// nodes: the replicas not yet synced since they got the bytes, by
	// datanode, with the registration (connection) that got them; nil
	// while unknown (loaded from the log at start-up) or lost, until the
	// datanode registers and is handed the write again.
	nodes map[uint32]*conn
	seq   uint64 // the batch that made it durable (n.appliedSeq)
}

// journalState is the namenode's pending journaled writes, in commit
// order (guarded by n.mu), and its settler.
type journalState struct {
	entries []*journalEntry
	once    sync.Once
	kick    chan struct{}
}

// setBlocksJournaled is setblocks that also takes the request's journaled
// writes for the commit (Request.Journal, of file q.Ino).
func (n *Namenode) setBlocksJournaled(tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	resp, err := n.setBlocks(tx, who, q)
	if err == nil {
		for _, w := range q.Journal {
			tx.journal = append(tx.journal, meta.JournalWrite{Ino: q.Ino, Index: w.Index, Offset: w.Offset, Data: w.Data})
		}
	}
	return resp, err
}

// journalCommit moves a durable commit's unsynced data into its log
// record when all of it is journaled: every block tx wrote is an
// extension in place whose bytes tx journaled, and they give the
// checksum of the block list. Otherwise req keeps its datanodes, which
// the sync before the log fsync makes durable (datasync.go). Called with
// n.mu held, after prepareCommit.
func (n *Namenode) journalCommit(tx *Txn, req *commitReq) {
	if len(tx.journal) == 0 || n.cfg.Group != nil || n.ckpt == nil || req.change == nil {
		return
	}
	bs := int(n.cfg.Blocksize)
	type key struct{ ino, index uint64 }
	total := 0
	writes := make([]meta.JournalWrite, 0, len(tx.journal))
	seen := map[key]bool{}
	for _, w := range tx.journal {
		total += len(w.Data)
		k := key{w.Ino, w.Index}
		if seen[k] || total > wire.MaxJournalBytes {
			return
		}
		seen[k] = true
		in := n.ns.inodes[w.Ino]
		if in == nil {
			return
		}
		old, _, ok := blockAt(in.blocks, w.Index)
		if !ok || int64(w.Offset) != in.attr.Size-int64(w.Index)*int64(bs) {
			return // not an extension of the committed last block
		}
		cur, reps, ok := blockAt(tx.blocks[w.Ino], w.Index)
		if !ok || cur.Gen != old.Gen || len(reps) == 0 {
			return
		}
		for _, r := range reps {
			if !tx.extendedAttached(r.Node, r.Start, w.Ino, w.Index, cur.Gen) {
				return
			}
		}
		if cur.CRC[0] != old.CRC[0]^blockcrc.Placed(int(w.Offset), w.Data, bs)^blockcrc.ZeroExtend(0, uint64(bs)) {
			return // the bytes are not what the block list says
		}
		w.Gen, w.CRC = cur.Gen, cur.CRC[0]
		writes = append(writes, w)
	}
	// Every replica tx wrote must be one of those extensions.
	for ino, xs := range tx.blocks {
		for _, x := range xs {
			for k := uint64(0); k < uint64(x.Count); k++ {
				for _, r := range x.Replicas {
					if tx.replaces(r.Node, r.Start+k, 1) && !seen[key{ino, x.Index + k}] {
						return
					}
				}
			}
		}
	}
	req.change.Journal = writes
	for _, w := range writes {
		_, reps, _ := blockAt(tx.blocks[w.Ino], w.Index)
		e := &journalEntry{w: w, nodes: map[uint32]*conn{}}
		for _, r := range reps {
			e.nodes[r.Node] = req.dataNodes[r.Node]
		}
		req.journal = append(req.journal, e)
	}
	req.dataNodes = nil // durable with the log record itself
}

// blockAt finds block index of a block list: its extent (one block: its
// checksum and generation) and its replicas.
func blockAt(xs []wire.Extent, index uint64) (wire.Extent, []wire.Run, bool) {
	for _, x := range xs {
		if x.Index <= index && index < x.Index+uint64(x.Count) {
			k := index - x.Index
			if int(k) >= len(x.CRC) {
				return wire.Extent{}, nil, false
			}
			reps := make([]wire.Run, len(x.Replicas))
			for j, r := range x.Replicas {
				reps[j] = wire.Run{Node: r.Node, Start: r.Start + k}
			}
			return wire.Extent{Index: index, Count: 1, CRC: []uint32{x.CRC[k]}, Gen: x.Gen}, reps, true
		}
	}
	return wire.Extent{}, nil, false
}

// journalApplied adds a batch's journaled writes to the pending ones.
// Called by the committer with n.mu held, after n.appliedSeq counted the
// batch.
func (n *Namenode) journalApplied(r *commitReq) {
	for _, e := range r.journal {
		e.seq = n.appliedSeq
		for id, c := range e.nodes {
			if dn := n.nodes.get(id); dn != nil && dn.alive && dn.conn != c {
				// It registered anew after the commit checked it and
				// before this: its registration did not get the write,
				// which a restart may have lost. The replica is
				// replaced from another (the replicator).
				n.condemnJournaled(e.w, id)
				delete(e.nodes, id)
			}
		}
		n.journal.entries = append(n.journal.entries, e)
	}
}

// condemnJournaled has datanode id's replica of w's block replaced, if
// the file still holds that block. Called with n.mu held.
func (n *Namenode) condemnJournaled(w meta.JournalWrite, id uint32) {
	reps, ok := n.journalReplicas(w)
	if !ok {
		return
	}
	x, _, _ := blockAt(n.ns.inodes[w.Ino].blocks, w.Index)
	for _, r := range reps {
		if r.Node == id {
			n.condemn(r, x.CRC[0])
		}
	}
}

// loadJournal makes the journaled writes of the commit log pending again
// at start-up (every replica unknown: a power cut may have taken them),
// those whose block is still the file's. Called before serving.
func (n *Namenode) loadJournal(ws []meta.JournalWrite) {
	for _, w := range coalesceJournal(ws) {
		if reps, ok := n.journalReplicas(w); ok {
			e := &journalEntry{w: w, nodes: map[uint32]*conn{}}
			for _, r := range reps {
				e.nodes[r.Node] = nil
			}
			n.journal.entries = append(n.journal.entries, e)
		}
	}
	if len(n.journal.entries) > 0 {
		n.log.Info("journaled writes of the commit log pending until their datanodes register", "writes", len(n.journal.entries))
	}
}

// journalReplicas returns the replicas of w's block if the file still
// holds it (same index, same allocation) and w lies within the file.
// Called with n.mu held.
func (n *Namenode) journalReplicas(w meta.JournalWrite) ([]wire.Run, bool) {
	in := n.ns.inodes[w.Ino]
	if in == nil {
		return nil, false
	}
	x, reps, ok := blockAt(in.blocks, w.Index)
	end := int64(w.Index)*int64(n.cfg.Blocksize) + int64(w.Offset) + int64(len(w.Data))
	if !ok || x.Gen != w.Gen || in.attr.Size < end {
		return nil, false
	}
	return reps, true
}

// journalPage bounds the data of the journaled writes one answer to a
// registration carries (a frame is at most wire.MaxFrame); a datanode
// told that more follow registers again on the same connection for the
// next page. A variable for tests.
var journalPage = 4 << 20

// journalFor returns the pending journaled writes datanode id must
// apply before it counts as registered on c (those c did not get yet, at
// most journalPage bytes of them, and whether more follow), and records
// that c got them. Called with n.mu held, as the registration is
// answered.
func (n *Namenode) journalFor(id uint32, c *conn) (out []wire.JournalWrite, more bool) {
	size := 0
	for _, e := range n.journal.entries {
		if got, ok := e.nodes[id]; !ok || got == c {
			continue
		}
		if size > 0 && size+len(e.w.Data) > journalPage {
			more = true
			break
		}
		reps, ok := n.journalReplicas(e.w)
		slot, found := uint64(0), false
		for _, r := range reps {
			if r.Node == id {
				slot, found = r.Start, true
			}
		}
		if !ok || !found {
			delete(e.nodes, id) // freed or rewritten since: nothing to restore
			continue
		}
		out = append(out, wire.JournalWrite{Ino: e.w.Ino, Index: e.w.Index, Block: slot, Gen: e.w.Gen, Offset: e.w.Offset, CRC: e.w.CRC, Data: e.w.Data})
		size += len(e.w.Data)
		e.nodes[id] = c
	}
	n.dropSettled()
	if len(out) > 0 {
		n.kickJournal()
	}
	return out, more
}

// journalCarry returns the pending journaled writes as a change of their
// own, for a commit log that starts over: the new log must hold them
// until their datanodes synced. Called by the committer's writing
// goroutine (not holding n.mu).
func (n *Namenode) journalCarry() *meta.Change {
	n.mu.Lock()
	defer n.mu.Unlock()
	// Replicas the files no longer hold (freed, rewritten, replaced while
	// their datanode was away) need nothing restored.
	for _, e := range n.journal.entries {
		reps, ok := n.journalReplicas(e.w)
		for id := range e.nodes {
			if !ok || !slices.ContainsFunc(reps, func(r wire.Run) bool { return r.Node == id }) {
				delete(e.nodes, id)
			}
		}
	}
	n.dropSettled()
	if len(n.journal.entries) == 0 {
		return nil
	}
	c := &meta.Change{}
	for _, e := range n.journal.entries {
		c.Journal = append(c.Journal, e.w)
	}
	return c
}

// dropSettled forgets the entries every replica of which synced. Called
// with n.mu held.
func (n *Namenode) dropSettled() {
	kept := n.journal.entries[:0]
	for _, e := range n.journal.entries {
		if len(e.nodes) > 0 {
			kept = append(kept, e)
		}
	}
	clear(n.journal.entries[len(kept):])
	n.journal.entries = kept
}

// kickJournal wakes the settler (started on first use). Called with or
// without n.mu.
func (n *Namenode) kickJournal() {
	n.journal.once.Do(func() {
		n.journal.kick = make(chan struct{}, 1)
		go n.settleJournal()
	})
	select {
	case n.journal.kick <- struct{}{}:
	default:
	}
}

// settleJournal has the datanodes holding durable journaled writes sync,
// a while after they were written, and forgets what they synced.
func (n *Namenode) settleJournal() {
	for {
		select {
		case <-n.stop:
			return
		case <-n.journal.kick:
		}
		select {
		case <-n.stop:
			return
		case <-time.After(n.journalSettle()):
		}
		n.mu.Lock()
		durable := n.durableSeq
		todo := map[uint32]*conn{}
		for _, e := range n.journal.entries {
			if e.seq > durable {
				continue
			}
			for id, c := range e.nodes {
				// A datanode that is gone or dead meanwhile gets the
				// write back when it registers (journalFor).
				if dn := n.nodes.get(id); c != nil && dn != nil && dn.alive && dn.conn == c {
					todo[id] = c
				}
			}
		}
		n.mu.Unlock()
		var wg sync.WaitGroup
		for id, c := range todo {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := n.syncDataNode(id, c); err != nil {
					// Kept: handed to the datanode again when it registers.
					n.log.Warn("journaled writes not synced on their datanode yet", "node", id, "err", err)
					return
				}
				n.mu.Lock()
				defer n.mu.Unlock()
				for _, e := range n.journal.entries {
					if e.seq <= durable && e.nodes[id] == c {
						delete(e.nodes, id)
					}
				}
				n.dropSettled()
			}()
		}
		wg.Wait()
	}
}

// extendedAttached reports whether tx extended block start of node in
// place as file block index of ino and attached it.
func (tx *Txn) extendedAttached(node uint32, start, ino, index, gen uint64) bool {
	for _, r := range tx.extended {
		if r.attached && r.node == node && r.start == start && r.ino == ino && r.index == index && r.gen == gen {
			return true
		}
	}
	return false
}

// coalesceJournal merges the journaled writes of each block that follow
// one another (each starting where the one before ended: appends) into
// one, with the later checksum: what a restart hands back is then about
// a block per block appended to, not every append of the log. A write
// starting further on is kept apart: what lies between may be trailing
// zeros its writer did not send, or bytes a commit that was not
// journaled synced on the datanodes.
func coalesceJournal(ws []meta.JournalWrite) []meta.JournalWrite {
	type key struct{ ino, index, gen uint64 }
	last := map[key]int{}
	var out []meta.JournalWrite
	for _, w := range ws {
		k := key{w.Ino, w.Index, w.Gen}
		if i, ok := last[k]; ok {
			p := &out[i]
			if int(w.Offset) == int(p.Offset)+len(p.Data) {
				p.Data = append(append(make([]byte, 0, len(p.Data)+len(w.Data)), p.Data...), w.Data...)
				p.CRC = w.CRC
				continue
			}
		}
		last[k] = len(out)
		out = append(out, w)
	}
	return out
}
