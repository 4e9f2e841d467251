package namenode

// Datanode service states that outlive the namenode: a drain mark and a
// datanode removed for good (plasma admin datanode remove). Both are
// store records (meta.Change.Drains, RemoveNodes; commit log format 2),
// and an admin operation that changes them is answered once its record
// is durable.

import (
	"fmt"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// maxRemoveExamples bounds the files a refused removal names.
const maxRemoveExamples = 3

// loadNodeService restores the drain marks and the removed datanodes of
// the store at start-up.
func (n *Namenode) loadNodeService(snap *meta.Snapshot) {
	for _, id := range snap.Draining {
		if n.nodes.get(id) != nil {
			n.repl.draining[id] = true
		}
	}
	for _, d := range snap.Removed {
		n.nodes.removed[d.Identity] = d.ID
	}
}

// refuseRemoved is the answer to the registration of a volume removed
// from the cluster ("" if identity was not removed).
func (n *Namenode) refuseRemoved(identity string) string {
	id, gone := n.nodes.removed[identity]
	if !gone {
		return ""
	}
	return fmt.Sprintf("datanode volume %s (id %d) was removed from the cluster ('plasma admin datanode remove'): its blocks are no longer part of any file. "+
		"To use this disk again, initialise a new volume on it (its old data is lost); it then joins as a new datanode", identity, id)
}

// answerDurable answers request id on c with resp once every change
// queued before it (the admin operation's record) is durable.
func (n *Namenode) answerDurable(c *conn, resp *wire.Response) error {
	return &answersLater{func(id uint64) {
		n.cm.submit(&commitReq{owner: c, reply: func(err error) {
			if err != nil {
				c.sendAsync(id, &wire.Response{Code: wire.ErrCodeUnavailable, Msg: fmt.Sprintf("datanode state not recorded: %v", err)})
				return
			}
			c.sendAsync(id, resp)
		}, direct: func() { c.send(id, resp) }}, c)
	}}
}

// serviceChange is the store change that records dn's new service state
// (enabled, drain mark), or nil if neither changed. rec is dn's record
// with the new Enabled. Called with n.mu held, before the change is made
// in memory.
func (n *Namenode) serviceChange(dn *dnode, rec meta.Datanode, draining bool) *meta.Change {
	var ch meta.Change
	if rec != dn.Datanode {
		ch.PutNodes = []meta.Datanode{rec}
	}
	if draining != n.repl.draining[dn.ID] {
		ch.Drains = map[uint32]bool{dn.ID: draining}
	}
	if ch.PutNodes == nil && ch.Drains == nil {
		return nil
	}
	return &ch
}

// removeDatanode takes dn out of the cluster for good, if it holds no
// replica any more (drained) or it has been dead for longer than
// -dead-after and every block it holds has a replica on a live datanode:
// its replicas are struck from the block lists and the datanode from the
// registry, in memory at once, and the returned change records both.
// Called with n.mu held, after a full scan (freshStatus).
func (n *Namenode) removeDatanode(dn *dnode, now time.Time) (*meta.Change, error) {
	rp := n.repl
	what := fmt.Sprintf("datanode %d (%s)", dn.ID, dn.Identity)
	dead := !dn.alive && now.Sub(rp.lastSeen(dn)) >= rp.deadAfter
	switch st := n.nodeState(dn, now, rp.last); {
	case st == nodeDrained || dead:
	case st == nodeAway:
		return nil, fail(wire.ErrCodeInvalid, "%s is down but not dead yet (the namenode's -dead-after, %v, has not passed since its last heartbeat): its replicas may come back; remove it once it is dead", what, rp.deadAfter)
	case st == nodeDraining:
		return nil, fail(wire.ErrCodeInvalid, "%s is still draining (%d blocks left): wait until it is drained ('plasma admin datanode drain %d -wait'), then remove it", what, rp.last.blocks[dn.ID], dn.ID)
	default:
		return nil, fail(wire.ErrCodeInvalid, "%s is live and not drained: drain it first ('plasma admin datanode drain %d -wait'), then remove it", what, dn.ID)
	}
	switch {
	case rp.busy[dn.ID] > 0:
		return nil, fail(wire.ErrCodeUnavailable, "%s takes part in %d re-replication copies: try again once they end", what, rp.busy[dn.ID])
	case n.nodes.reserved(dn.Identity):
		return nil, fail(wire.ErrCodeUnavailable, "%s is registering right now: try again", what)
	}
	for _, tx := range n.txns.all() {
		if len(tx.allocated[dn.ID]) > 0 {
			return nil, fail(wire.ErrCodeUnavailable, "%s holds blocks an open transaction is writing: try again once it ends", what)
		}
	}
	busy := n.busyInodes()
	ch := &meta.Change{RemoveNodes: []meta.RemovedDatanode{{ID: dn.ID, Identity: dn.Identity}}}
	stripped := map[uint64][]wire.Extent{}
	var only uint64
	var examples []string
	for ino, in := range n.ns.inodes {
		if in.attr.Type != wire.TypeFile || !referencesNode(in.blocks, dn.ID) {
			continue
		}
		if busy[ino] {
			return nil, fail(wire.ErrCodeUnavailable, "%s: a transaction is changing a file with a replica on it (inode %d): try again once it ends", what, ino)
		}
		xs := make([]wire.Extent, 0, len(in.blocks))
		for _, x := range in.blocks {
			var keep []wire.Run
			elsewhere := false
			for _, r := range x.Replicas {
				if r.Node == dn.ID {
					continue
				}
				keep = append(keep, r)
				if st := n.replicaState(r, x, now); st == repGood || st == repLeaving {
					elsewhere = true
				}
			}
			if len(keep) < len(x.Replicas) && !elsewhere {
				only += uint64(x.Count)
				if len(examples) < maxRemoveExamples {
					p, err := n.pathOf(nil, ino)
					if err != nil {
						p = fmt.Sprintf("inode %d", ino)
					}
					examples = append(examples, fmt.Sprintf("%s blocks %d-%d", p, x.Index, x.Index+uint64(x.Count)-1))
				}
			}
			x.Replicas = keep
			xs = appendExtent(xs, x)
		}
		stripped[ino] = xs
	}
	if only > 0 {
		return nil, fail(wire.ErrCodeInvalid, "%s holds the only replica of %d blocks (%v): removing it would lose them. Bring it back so they are copied, "+
			"or delete those files first", what, only, examples)
	}
	if len(stripped) > 0 {
		ch.Blocks = map[uint64][]meta.Extent{}
		for ino, xs := range stripped {
			n.ns.inodes[ino].blocks = xs
			ch.Blocks[ino] = storeExtents(xs)
		}
		n.fsck.note(ch)
		n.epoch++ // transactions that began before may still read the struck replicas
	}
	n.nodes.remove(dn)
	delete(rp.draining, dn.ID)
	delete(rp.busy, dn.ID)
	for r := range rp.bad {
		if r.Node == dn.ID {
			delete(rp.bad, r)
		}
	}
	rp.forceFull = true
	rp.wake()
	n.log.Warn("datanode removed from the cluster", "node", dn.Identity, "id", dn.ID, "replicas_struck", len(stripped) > 0)
	return ch, nil
}

// referencesNode reports whether an extent of xs has a replica on node.
func referencesNode(xs []wire.Extent, node uint32) bool {
	for _, x := range xs {
		for _, r := range x.Replicas {
			if r.Node == node {
				return true
			}
		}
	}
	return false
}
