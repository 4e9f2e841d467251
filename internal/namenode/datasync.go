package namenode

// Deferred data syncs (issue 27 item 4).
//
// A client committing asynchronously may leave its data unsynced on the
// datanodes (wire.FlagUnsyncedData): the data must be durable only when
// the commit is, at the log fsync that makes it durable (a durable
// commit, a Sync, the namenode's window). Before that fsync, the syncer
// has every datanode holding such data fdatasync its volume, in parallel,
// once per datanode per log fsync (nnStore.sync; a new connection each
// time); the replicas of a datanode that cannot be made to are struck
// before the log is fsynced, and only a block left with no synced replica
// fails the sync, which stops the namenode as any failed sync of its log
// does, rather than fsync the log over data nobody holds
// (datasyncstrike.go; docs/design.md, "Deferred data syncs").
//
// Which datanodes: those holding replicas the transaction wrote (blocks
// it allocated or extended in place) that its block lists reference,
// known here without the client's word. A restart of a datanode loses
// what it had not synced (after a power cut), so each is recorded with
// its registration (its connection) when the transaction first got
// blocks there: if that changed by the commit, the commit drops those
// replicas (refused if a block keeps none), as a client drops the
// replicas its sync failed on; if it changed by the sync, the sync fails
// (checked after the datanode's answer: a restarted datanode answers a
// sync only once registered, DataSync).
//
// Such commits are written to the log only while no sync runs
// (committer.writeBatch): a log fsync that started before their
// datanodes were synced must not make them durable.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
)

// dataSyncTimeout bounds one datanode's sync at a durability point.
const dataSyncTimeout = 30 * time.Second

// noteDataNode records that tx got blocks on node, as registered now.
// Called with n.mu held.
func (n *Namenode) noteDataNode(tx *Txn, node uint32) {
	var c *conn
	if dn := n.nodes.get(node); dn != nil && dn.alive {
		c = dn.conn
	}
	if tx.dataNodes == nil {
		tx.dataNodes = map[uint32]*conn{}
	}
	if old, ok := tx.dataNodes[node]; ok && old != c {
		c = nil // registered anew during the transaction
	}
	tx.dataNodes[node] = c
}

// unsyncedDataNodes returns the datanodes holding replicas tx wrote that
// its block lists reference, with their registrations when tx got blocks
// there. The replicas on a datanode that registered anew since (a restart
// loses what it had not synced) or is gone are dropped from tx first, as
// a client drops those its sync failed on (an error if a block keeps no
// replica). Called with n.mu held.
func (n *Namenode) unsyncedDataNodes(tx *Txn) (map[uint32]*conn, error) {
	out := map[uint32]*conn{}
	var lost []string
	for id := range tx.writtenNodes() {
		c, dn := tx.dataNodes[id], n.nodes.get(id)
		if dn == nil {
			return nil, fmt.Errorf("datanode %d, written to by transaction %d, is no longer known: nothing was committed", id, tx.key.id)
		}
		if c == nil || !dn.alive || dn.conn != c {
			lost = append(lost, dn.Identity)
			continue
		}
		out[id] = c
	}
	if len(lost) > 0 {
		if err := n.dropReplicas(tx, lost); err != nil {
			return nil, fmt.Errorf("datanodes %v restarted or lost their namenode connection while transaction %d wrote to them unsynced (their writes may be lost): %w; nothing was committed", lost, tx.key.id, err)
		}
		n.log.Warn("replicas written unsynced dropped from an async commit: their datanodes restarted or lost the namenode since", "nodes", lost)
	}
	return out, nil
}

// writtenNodes returns the datanodes holding a replica tx wrote (a block
// it allocated or extended in place) that its block lists reference.
func (tx *Txn) writtenNodes() map[uint32]bool {
	need := map[uint32]bool{}
	for _, xs := range tx.blocks {
		for _, x := range xs {
			for _, r := range x.Replicas {
				if need[r.Node] {
					continue
				}
				for k := uint64(0); k < uint64(x.Count); k++ {
					if tx.replaces(r.Node, r.Start+k, 1) {
						need[r.Node] = true
						break
					}
				}
			}
		}
	}
	return need
}

// unsyncedData reports whether a batch holds a commit with unsynced data.
func unsyncedData(batch []*commitReq) bool {
	for _, r := range batch {
		if len(r.dataNodes) > 0 {
			return true
		}
	}
	return false
}

// pendDataSync adds a commit's datanodes (and the blocks it wrote there) to
// those the next sync must have sync first. Called with n.mu held.
func (n *Namenode) pendDataSync(r *commitReq) {
	if len(r.dataNodes) > 0 { // none once its data is journaled (journal.go)
		n.dataSyncBlocks = append(n.dataSyncBlocks, r.dataBlocks...)
	}
	for id, c := range r.dataNodes {
		if n.dataSync == nil {
			n.dataSync = map[uint32]*conn{}
		}
		if old, ok := n.dataSync[id]; ok && old != c {
			c = nil // two registrations: the older one's writes may be lost
		}
		n.dataSync[id] = c
	}
}

// takeDataSync hands the syncer the datanodes to sync and the blocks
// written there. Called with n.mu held.
func (n *Namenode) takeDataSync() (map[uint32]*conn, []unsyncedBlock) {
	d, b := n.dataSync, n.dataSyncBlocks
	n.dataSync, n.dataSyncBlocks = nil, nil
	return d, b
}

// syncDataNodes has every datanode of nodes sync its volume, in parallel,
// and checks that each is still the registration that took the writes. It
// returns those that failed, with their errors.
func (n *Namenode) syncDataNodes(nodes map[uint32]*conn) dataSyncFailure {
	if len(nodes) == 0 {
		return nil
	}
	type result struct {
		id  uint32
		err error
	}
	var wg sync.WaitGroup
	res := make(chan result, len(nodes))
	for id, want := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res <- result{id, n.syncDataNode(id, want)}
		}()
	}
	wg.Wait()
	close(res)
	var failed dataSyncFailure
	for r := range res {
		if r.err != nil {
			if failed == nil {
				failed = dataSyncFailure{}
			}
			failed[r.id] = r.err
		}
	}
	return failed
}

// syncDataNode has datanode id sync its volume; want is its registration
// when it took the writes.
func (n *Namenode) syncDataNode(id uint32, want *conn) error {
	current := func() (string, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		dn := n.nodes.get(id)
		if want == nil || dn == nil || !dn.alive || dn.conn != want {
			return "", fmt.Errorf("datanode %d holds unsynced data of async commits but restarted or lost its namenode connection since: that data may be lost", id)
		}
		return dn.info.Addr, nil
	}
	addr, err := current()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), dataSyncTimeout)
	defer cancel()
	err = n.dataExchangeAnswers(ctx, addr, func(k int) *wire.DataReq {
		if k > 0 {
			return nil
		}
		return &wire.DataReq{Op: wire.DataSync}
	}, nil)
	if err != nil {
		return fmt.Errorf("datanode %d (%s): sync unsynced data of async commits: %w", id, addr, err)
	}
	_, err = current()
	return err
}
