package namenode

// Striking replicas whose deferred sync failed (issue 27 item 4).
//
// At a durability point the syncer has every datanode holding unsynced
// data of async commits sync (datasync.go). When some cannot (dead,
// restarted, cut off), the commits that wrote there are already in the
// log, not yet fsynced. For each block they wrote on such a datanode the
// syncer then:
//
//   - strikes that replica if the block keeps one on a datanode that did
//     not fail: the file's block list loses it, in memory at once and in
//     the log by an internal change written before the next log fsync
//     (the round that failed does not fsync; its waiters wait for the
//     next one). The file is under-replicated, which fsck reports and the
//     replicator repairs; the replica is also marked damaged in its
//     version, so a commit prepared before the strike that lists it
//     again does not count it;
//   - otherwise (no replica of the block synced) retries the failed
//     datanodes while they keep their registration, for dataSyncTimeout,
//     and then fails the sync, which stops the namenode before its log is
//     fsynced over data nobody holds (docs/design.md).

import (
	"errors"
	"fmt"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// errSyncAgain is what a store sync returns when it made nothing durable
// and must run again after the changes it queued are written (a strike).
var errSyncAgain = errors.New("sync again once the queued changes are written")

// unsyncedBlock is one block an async commit wrote unsynced: the block
// index of file ino and its replica's slot on node.
type unsyncedBlock struct {
	ino, index uint64
	node       uint32
	slot       uint64
}

// unsyncedBlocks returns the blocks tx wrote on the datanodes of nodes.
func (tx *Txn) unsyncedBlocks(nodes map[uint32]*conn) []unsyncedBlock {
	var out []unsyncedBlock
	for ino, xs := range tx.blocks {
		for _, x := range xs {
			for _, r := range x.Replicas {
				if _, ok := nodes[r.Node]; !ok {
					continue
				}
				for k := uint64(0); k < uint64(x.Count); k++ {
					if tx.replaces(r.Node, r.Start+k, 1) {
						out = append(out, unsyncedBlock{ino: ino, index: x.Index + k, node: r.Node, slot: r.Start + k})
					}
				}
			}
		}
	}
	return out
}

// dataSyncFailure is a datanode whose sync failed, with its error.
type dataSyncFailure map[uint32]error

// strikeUnsynced strikes the replicas of blocks that failed their sync
// (on the datanodes of failed) wherever the block keeps a replica
// elsewhere, and queues the change that makes it durable. It returns the
// blocks that kept no other replica (nothing is struck of their files
// then), and whether any replica was struck. Called with n.mu held.
func (n *Namenode) strikeUnsynced(blocks []unsyncedBlock, failed dataSyncFailure) (lost []unsyncedBlock, struckAny bool) {
	byIno := map[uint64][]unsyncedBlock{}
	for _, b := range blocks {
		if _, ok := failed[b.node]; ok {
			byIno[b.ino] = append(byIno[b.ino], b)
		}
	}
	for ino, bs := range byIno {
		in := n.ns.inodes[ino]
		if in == nil || in.attr.Type != wire.TypeFile {
			continue // deleted since: nothing refers to those blocks
		}
		xs, struck, orphans := strikeRuns(in.blocks, bs, failed)
		if len(orphans) > 0 {
			lost = append(lost, orphans...)
			continue
		}
		if len(struck) == 0 {
			continue // rewritten since
		}
		in.blocks = xs
		struckAny = true
		for _, tx := range n.txns.all() {
			if txs, ok := tx.blocks[ino]; ok {
				tx.blocks[ino], _, _ = strikeRuns(txs, bs, failed)
			}
		}
		for r, crc := range struck {
			n.repl.bad[r] = crc
		}
		ch := &meta.Change{Blocks: map[uint64][]meta.Extent{ino: storeExtents(xs)}}
		n.fsck.note(ch)
		n.repl.note(ch)
		if n.strikes == nil {
			n.strikes = map[*meta.Change]bool{}
		}
		n.strikes[ch] = true
		n.deferChange(ch)
		n.log.Warn("replicas written unsynced by async commits struck: their datanode failed its sync; the file is under-replicated until re-replication",
			"ino", ino, "replicas", len(struck))
	}
	if struckAny {
		n.epoch++ // transactions that began before may still read the struck replicas
		n.repl.forceFull = true
		n.repl.wake()
	}
	return lost, struckAny
}

// strikeRuns returns xs without the replicas of bs that are listed there
// (each as a single block), the replicas struck with their checksums, and
// the blocks of bs listed with no replica outside failed (xs is returned
// unchanged then).
func strikeRuns(xs []wire.Extent, bs []unsyncedBlock, failed dataSyncFailure) ([]wire.Extent, map[wire.Run]uint32, []unsyncedBlock) {
	hit := map[wire.Run]unsyncedBlock{}
	for _, b := range bs {
		hit[wire.Run{Node: b.node, Start: b.slot}] = b
	}
	struck := map[wire.Run]uint32{}
	var orphans []unsyncedBlock
	var out []wire.Extent
	for _, x := range xs {
		if !extentHit(x, hit) {
			out = append(out, x)
			continue
		}
		for k := uint64(0); k < uint64(x.Count); k++ {
			p := splitExtent(x, k, 1)[min(k, 1)]
			keep := p.Replicas[:0:0]
			var gone []wire.Run
			for _, r := range p.Replicas {
				if b, ok := hit[r]; ok && b.index == p.Index {
					gone = append(gone, r)
					continue
				}
				keep = append(keep, r)
			}
			if len(gone) > 0 && !keepsOne(keep, failed) {
				orphans = append(orphans, hit[gone[0]])
			}
			for _, r := range gone {
				struck[r] = p.CRC[0]
			}
			p.Replicas = keep
			out = appendExtent(out, p)
		}
	}
	if len(orphans) > 0 {
		return xs, nil, orphans
	}
	return out, struck, nil
}

// extentHit reports whether a replica of x is one of hit at its index.
func extentHit(x wire.Extent, hit map[wire.Run]unsyncedBlock) bool {
	for _, r := range x.Replicas {
		for k := uint64(0); k < uint64(x.Count); k++ {
			if b, ok := hit[wire.Run{Node: r.Node, Start: r.Start + k}]; ok && b.index == x.Index+k {
				return true
			}
		}
	}
	return false
}

// keepsOne reports whether a replica of rs is on a datanode that did not
// fail its sync.
func keepsOne(rs []wire.Run, failed dataSyncFailure) bool {
	for _, r := range rs {
		if _, ok := failed[r.Node]; !ok {
			return true
		}
	}
	return false
}

// syncOrStrike has the datanodes of nodes sync and, for those that fail,
// strikes their unsynced replicas (strikeUnsynced). It returns nil when
// every datanode synced, errSyncAgain when replicas were struck (the log
// must not be fsynced before the strike is written), and an error when a
// block kept no synced replica and its datanodes still failed after
// retrying for dataSyncTimeout.
func (n *Namenode) syncOrStrike(nodes map[uint32]*conn, blocks []unsyncedBlock) error {
	failed := n.syncDataNodes(nodes)
	if len(failed) == 0 {
		return nil
	}
	n.mu.Lock()
	lost, struck := n.strikeUnsynced(blocks, failed)
	n.mu.Unlock()
	if len(lost) > 0 {
		if err := n.retryLost(nodes, lost, failed); err != nil {
			return err
		}
	}
	if struck {
		return errSyncAgain
	}
	return nil
}

// retryLost retries the syncs of the datanodes holding the only replicas
// of lost blocks while they keep the registration that took the writes
// (a datanode that restarted may have lost them), for dataSyncTimeout.
func (n *Namenode) retryLost(nodes map[uint32]*conn, lost []unsyncedBlock, failed dataSyncFailure) error {
	need := map[uint32]*conn{}
	for _, b := range lost {
		need[b.node] = nodes[b.node]
	}
	deadline := time.Now().Add(dataSyncTimeout)
	for len(need) > 0 && time.Now().Before(deadline) {
		again := n.syncDataNodes(need)
		for id := range need {
			if err, ok := again[id]; ok {
				failed[id] = err
				if !n.sameRegistration(id, need[id]) {
					return n.lostError(lost, failed)
				}
				continue
			}
			delete(need, id)
		}
		if len(need) > 0 {
			time.Sleep(200 * time.Millisecond) // a retry interval, not a synchronisation
		}
	}
	if len(need) > 0 {
		return n.lostError(lost, failed)
	}
	return nil
}

// sameRegistration reports whether datanode id is still registered as
// want.
func (n *Namenode) sameRegistration(id uint32, want *conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	dn := n.nodes.get(id)
	return want != nil && dn != nil && dn.alive && dn.conn == want
}

// lostError says which files lost every replica of data their async
// commits wrote, and why.
func (n *Namenode) lostError(lost []unsyncedBlock, failed dataSyncFailure) error {
	inos := map[uint64]bool{}
	for _, b := range lost {
		inos[b.ino] = true
	}
	var errs []error
	for _, err := range failed {
		errs = append(errs, err)
	}
	return fmt.Errorf("%d file(s) (inode %d, ...) hold blocks of async commits whose every replica failed its sync: the commit log is not made durable over data no datanode holds: %w",
		len(inos), lost[0].ino, errors.Join(errs...))
}
