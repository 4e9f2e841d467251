package namenode

import (
	"sort"
	"strings"

	"github.com/plasmafs/plasma/internal/wire"
)

// runLength is the number of blocks a single-replica file puts on one
// datanode before moving to the next, so sequential and random reads spread
// over the nodes while each run stays contiguous on disk.
const runLength = 128

// Where a single-replica file's runs go: each of its groups of runLength
// blocks on one datanode, the next group on the next datanode (by id). The
// first group, of a new file, goes to the datanode with the most free
// blocks; datanodes within nearSlack of it count as equals and take turns
// (nodeRegistry.turn), so that files, also of concurrent writers, spread
// over the cluster instead of all starting on one datanode.
//
// nearSlack is max(runLength, the most free blocks / nearFraction).
const nearFraction = 16

// blockAllocator places one allocation request: which datanodes get each
// replica of each block, taken from their block maps. It knows nothing of
// transactions; the namenode records the runs it returns in the
// transaction that asked, which frees them if it does not commit.
//
// Lock discipline: it changes the block maps of its datanodes, so it is
// built and used under Namenode.mu and dropped at the end of the request.
type blockAllocator struct {
	nodes []*dnode          // candidates: live, enabled datanodes
	hints map[uint32]uint64 // per datanode, where the file's blocks there end
	// groups: per group of runLength blocks of the file, the datanodes
	// holding its replicas, first replica first: a group's blocks stay
	// together on them.
	groups map[uint64][]uint32
	turn   *uint64 // whose turn it is among near-equal datanodes
	bs     uint64  // the blocksize, for the datanodes' room in bytes (space.go)
	// size is the file's size the writer announced (0: unknown), for
	// what its blocks will hold.
	size int64
}

// need is the bytes blocks index..index+k-1 of the file will hold on a
// sparse datanode: up to the announced size, in whole pages, at least a
// page each; whole blocks if the size is unknown.
func (a *blockAllocator) need(index, k uint64) uint64 {
	if a.size <= 0 {
		return k * a.bs
	}
	return max(committedBytes(a.size, index, k, a.bs), k*pageSize)
}

// newBlockAllocator makes an allocator over the live datanodes nodes for a
// file whose current block list is xs (the contiguity hints).
func newBlockAllocator(nodes []*dnode, xs []wire.Extent) *blockAllocator {
	a := &blockAllocator{nodes: nodes, hints: map[uint32]uint64{}, groups: map[uint64][]uint32{}, turn: new(uint64)}
	for _, x := range xs {
		for _, r := range x.Replicas {
			a.hints[r.Node] = r.Start + uint64(x.Count)
		}
		a.noteGroups(x)
	}
	return a
}

// noteGroups records where the file's blocks of extent x are.
func (a *blockAllocator) noteGroups(x wire.Extent) {
	if len(x.Replicas) == 0 || x.Count == 0 {
		return
	}
	nodes := make([]uint32, len(x.Replicas))
	for i, r := range x.Replicas {
		nodes[i] = r.Node
	}
	for g := x.Index / runLength; g <= (x.Index+uint64(x.Count)-1)/runLength; g++ {
		a.groups[g] = nodes
	}
}

// notePending adds the runs the file's transaction allocated but has not
// attached yet (a file written in several flushes) to what the allocator
// knows of the file, so its next blocks join them.
func (a *blockAllocator) notePending(runs []run) {
	// One run per replica of each piece (in no order): the piece's
	// replicas are the runs of its first block.
	pieces := map[uint64]*wire.Extent{}
	for _, r := range runs {
		if r.count == 0 {
			continue
		}
		if end, ok := a.hints[r.node]; !ok || r.start+r.count > end {
			a.hints[r.node] = r.start + r.count
		}
		if _, ok := a.groups[r.index/runLength]; ok {
			continue // attached already, or known from another piece
		}
		x := pieces[r.index]
		if x == nil {
			x = &wire.Extent{Index: r.index, Count: uint32(r.count)}
			pieces[r.index] = x
		}
		x.Count = min(x.Count, uint32(r.count))
		x.Replicas = append(x.Replicas, wire.Run{Node: r.node, Start: r.start})
	}
	for _, x := range pieces {
		sort.Slice(x.Replicas, func(i, j int) bool { return x.Replicas[i].Node < x.Replicas[j].Node })
		a.noteGroups(*x)
	}
}

// place allocates blocks index..index+count-1 of file ino with rep
// replicas and returns the extents and the runs taken (one per replica
// piece). pref names identities to favour; "-identity" excludes one (a
// client that just failed to write there). On error nothing stays taken.
func (a *blockAllocator) place(ino, index, count uint64, rep int, pref []string) ([]wire.Extent, []run, error) {
	prefSet, exclude := map[string]bool{}, map[string]bool{}
	for _, p := range pref {
		if strings.HasPrefix(p, "-") {
			exclude[p[1:]] = true
		} else {
			prefSet[p] = true
		}
	}
	var live []*dnode
	for _, dn := range a.nodes {
		if !exclude[dn.Identity] {
			live = append(live, dn)
		}
	}
	if rep > len(live) {
		return nil, nil, fail(wire.ErrCodeUnavailable, "replication %d requested but only %d usable datanodes are alive", rep, len(live))
	}
	sort.Slice(live, func(i, j int) bool {
		pi, pj := prefSet[live[i].Identity], prefSet[live[j].Identity]
		if pi != pj {
			return pi
		}
		if ri, rj := live[i].room(a.bs), live[j].room(a.bs); rep > 1 && ri != rj {
			return ri > rj
		}
		return live[i].ID < live[j].ID
	})
	var out []wire.Extent
	var runs []run
	preferred := len(prefSet) > 0 && prefSet[live[0].Identity]
	for count > 0 {
		piece := count
		var set []*dnode
		if rep == 1 {
			group := index / runLength
			piece = min(count, (group+1)*runLength-index)
			set = []*dnode{a.singleNode(group, live, preferred)}
		} else {
			set = a.replicaNodes(index/runLength, live, rep)
		}
		xs, rs, err := a.piece(ino, set, live, index, piece)
		runs = append(runs, rs...)
		if err != nil {
			a.release(runs)
			return nil, nil, err
		}
		for _, x := range xs {
			a.noteGroups(x)
		}
		out = append(out, xs...)
		index += piece
		count -= piece
	}
	return out, runs, nil
}

// singleNode returns the datanode for group of a single-replica file:
// the one holding the group's blocks already, else the one after the
// datanode of the group before (in live's order), else, for a file's
// first blocks, live[0] if preferred, or the one with the most free
// blocks, near-equals taking turns.
func (a *blockAllocator) singleNode(group uint64, live []*dnode, preferred bool) *dnode {
	at := func(id uint32) int {
		for i, dn := range live {
			if dn.ID == id {
				return i
			}
		}
		return -1
	}
	if ids := a.groups[group]; len(ids) > 0 {
		if i := at(ids[0]); i >= 0 {
			return live[i]
		}
	}
	if ids := a.groups[group-1]; len(ids) > 0 && group > 0 {
		if i := at(ids[0]); i >= 0 {
			return live[(i+1)%len(live)]
		}
	}
	if preferred {
		return live[0]
	}
	return a.roomiest(live)
}

// replicaNodes returns the rep datanodes for group of a file with rep
// replicas: those holding the group's blocks already, if all are in live,
// else the first rep of live (the preferred, then the roomiest).
func (a *blockAllocator) replicaNodes(group uint64, live []*dnode, rep int) []*dnode {
	ids := a.groups[group]
	if len(ids) != rep {
		return live[:rep]
	}
	set := make([]*dnode, 0, rep)
	for _, id := range ids {
		for _, dn := range live {
			if dn.ID == id {
				set = append(set, dn)
			}
		}
	}
	if len(set) != rep {
		return live[:rep]
	}
	return set
}

// roomiest returns the datanode of live with the most free blocks, or,
// if others are within nearSlack of it, the one whose turn it is among
// them (live is in id order).
func (a *blockAllocator) roomiest(live []*dnode) *dnode {
	most := uint64(0)
	for _, dn := range live {
		most = max(most, dn.room(a.bs))
	}
	slack := max(runLength, most/nearFraction)
	var near []*dnode
	for _, dn := range live {
		if dn.room(a.bs)+slack >= most {
			near = append(near, dn)
		}
	}
	dn := near[*a.turn%uint64(len(near))]
	*a.turn++
	return dn
}

// piece allocates count blocks on the nodes of set (one replica each),
// replacing a full node by another live one. It returns the runs it took
// also when it fails, for place to give back.
func (a *blockAllocator) piece(ino uint64, set, live []*dnode, index, count uint64) ([]wire.Extent, []run, error) {
	set = append([]*dnode(nil), set...)
	var out []wire.Extent
	var runs []run
	for count > 0 {
		starts := make([]uint64, len(set))
		got := make([]uint64, len(set))
		for i := 0; i < len(set); i++ {
			s, g := set[i].alloc(count, a.hints[set[i].ID], func(k uint64) uint64 { return a.need(index, k) })
			if g == 0 {
				// Full: undo this round and substitute another node.
				for j := 0; j < i; j++ {
					set[j].used.clear(starts[j], got[j])
				}
				repl := substitute(set, live, set[i], a.bs)
				if repl == nil {
					return nil, runs, fail(wire.ErrCodeNoSpace, "no space: datanode %s is full and no other live datanode has room", set[i].Identity)
				}
				set[i] = repl
				i = -1
				continue
			}
			starts[i], got[i] = s, g
		}
		l := got[0]
		for _, g := range got {
			l = min(l, g)
		}
		x := wire.Extent{Index: index, Count: uint32(l)}
		for i, dn := range set {
			if got[i] > l {
				dn.used.clear(starts[i]+l, got[i]-l)
			}
			x.Replicas = append(x.Replicas, wire.Run{Node: dn.ID, Start: starts[i]})
			r := run{node: dn.ID, start: starts[i], count: l, ino: ino, index: index}
			if dn.sparse() {
				r.reserved = a.need(index, l)
				dn.space.reserved += r.reserved
			}
			runs = append(runs, r)
			a.hints[dn.ID] = starts[i] + l
		}
		out = append(out, x)
		index += l
		count -= l
	}
	return out, runs, nil
}

// release gives runs back to the block maps of the allocator's nodes.
func (a *blockAllocator) release(runs []run) {
	for _, r := range runs {
		for _, dn := range a.nodes {
			if dn.ID == r.node {
				dn.used.clear(r.start, r.count)
				dn.unreserveBytes(r.reserved, 0)
			}
		}
	}
}

// substitute returns a live node outside set, other than full, with room.
func substitute(set, live []*dnode, full *dnode, bs uint64) *dnode {
	in := map[*dnode]bool{}
	for _, d := range set {
		in[d] = true
	}
	for _, d := range live {
		if !in[d] && d != full && d.room(bs) > 0 {
			return d
		}
	}
	return nil
}

// allocate allocates blocks index..index+count-1 of a file with rep replicas
// and generation gen for tx, which holds them until it ends. On error
// nothing is taken. Called with n.mu held.
// It returns the extents and the bytes they hold on the datanodes until
// the transaction ends (space.go: what a sparse datanode reserved, whole
// blocks on a fixed one).
func (n *Namenode) allocate(tx *Txn, ino uint64, index, count uint64, rep int, pref []string, gen uint64, size int64) ([]wire.Extent, uint64, error) {
	a := newBlockAllocator(n.liveNodes(), n.ns.blockList(tx, ino))
	a.turn = &n.nodes.turn
	a.bs = uint64(n.cfg.Blocksize)
	a.size = size
	for _, runs := range tx.allocated {
		var mine []run
		for _, r := range runs {
			if r.ino == ino {
				mine = append(mine, r)
			}
		}
		a.notePending(mine)
	}
	xs, runs, err := a.place(ino, index, count, rep, pref)
	if err != nil {
		return nil, 0, err
	}
	var held uint64
	if len(runs) > 0 && tx.allocated == nil {
		tx.allocated = map[uint32][]run{}
	}
	for _, r := range runs {
		r.gen = gen
		tx.allocated[r.node] = append(tx.allocated[r.node], r)
		if dn := n.nodes.get(r.node); dn != nil && dn.sparse() {
			held += r.reserved
		} else {
			held += r.count * a.bs
		}
		n.noteDataNode(tx, r.node)
	}
	for i := range xs {
		xs[i].Gen = gen
	}
	return xs, held, nil
}
