package namenode

import (
	"sort"
	"strings"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// dnode is a datanode volume the namenode knows, live or not.
type dnode struct {
	meta.Datanode
	info     wire.NodeInfo
	used     *blockMap
	alive    bool
	lastSeen time.Time
	conn     *conn
	revoked  []uint64 // transaction tags to send with the next heartbeat answer
}

func (d *dnode) nodeInfo() wire.NodeInfo {
	ni := d.info
	ni.ID = d.ID
	ni.Identity = d.Identity
	ni.Blocks = d.Blocks
	ni.Used = d.used.nused
	ni.Alive = d.alive
	ni.Enabled = d.Enabled
	return ni
}

// register admits a datanode that connected on c. Called with n.mu held.
func (n *Namenode) register(c *conn, ni *wire.NodeInfo) (*wire.Response, error) {
	if ni.Identity == "" {
		return nil, fail(wire.ErrCodeInvalid, "datanode registration without identity")
	}
	if ni.Cluster != n.cfg.Cluster {
		return nil, fail(wire.ErrCodeInvalid, "datanode %s belongs to cluster %q, this namenode serves cluster %q", ni.Identity, ni.Cluster, n.cfg.Cluster)
	}
	if ni.Blocksize != n.cfg.Blocksize {
		return nil, fail(wire.ErrCodeInvalid, "datanode %s has blocksize %d, the cluster uses %d: re-initialise it with --blocksize %d", ni.Identity, ni.Blocksize, n.cfg.Blocksize, n.cfg.Blocksize)
	}
	if ni.Blocks == 0 {
		return nil, fail(wire.ErrCodeInvalid, "datanode %s has no blocks", ni.Identity)
	}
	dn := n.byIdentity[ni.Identity]
	if dn != nil && dn.alive && dn.conn != nil && dn.conn != c {
		return nil, fail(wire.ErrCodeExists, "datanode identity %s is already served by the live datanode at %s", ni.Identity, dn.info.Addr)
	}
	if dn == nil {
		id := uint32(1)
		for k := range n.nodes {
			if k >= id {
				id = k + 1
			}
		}
		dn = &dnode{Datanode: meta.Datanode{ID: id, Identity: ni.Identity, Blocks: ni.Blocks, Enabled: true}, used: newBlockMap(ni.Blocks)}
		if err := n.cfg.Store.Apply([]*meta.Change{{PutNodes: []meta.Datanode{dn.Datanode}}}); err != nil {
			return nil, fail(wire.ErrCodeInternal, "record datanode %s: %v", ni.Identity, err)
		}
		n.nodes[id] = dn
		n.byIdentity[ni.Identity] = dn
	} else if ni.Blocks != dn.Blocks {
		if ni.Blocks < dn.used.size && dn.used.firstUsedFrom(ni.Blocks) < dn.used.size {
			return nil, fail(wire.ErrCodeInvalid, "datanode %s shrank to %d blocks but blocks beyond that are in use", ni.Identity, ni.Blocks)
		}
		dn.Blocks = ni.Blocks
		dn.used.resize(ni.Blocks)
		if err := n.cfg.Store.Apply([]*meta.Change{{PutNodes: []meta.Datanode{dn.Datanode}}}); err != nil {
			return nil, fail(wire.ErrCodeInternal, "record datanode %s: %v", ni.Identity, err)
		}
	}
	dn.info = *ni
	dn.alive = true
	dn.lastSeen = time.Now()
	dn.conn = c
	n.log.Info("datanode registered", "node", dn.Identity, "id", dn.ID, "addr", ni.Addr, "blocks", ni.Blocks)
	out := dn.nodeInfo()
	return &wire.Response{Nodes: []wire.NodeInfo{out}}, nil
}

// connClosed marks the datanodes registered over c dead.
func (n *Namenode) connClosed(c *conn) {
	for _, dn := range n.nodes {
		if dn.conn == c {
			dn.alive = false
			dn.conn = nil
			n.log.Warn("datanode disconnected, marking dead", "node", dn.Identity)
		}
	}
}

func (n *Namenode) nodeList() []wire.NodeInfo {
	out := make([]wire.NodeInfo, 0, len(n.nodes))
	for _, dn := range n.nodes {
		out = append(out, dn.nodeInfo())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (n *Namenode) liveNodes() []*dnode {
	var out []*dnode
	for _, dn := range n.nodes {
		if dn.alive && dn.Enabled {
			out = append(out, dn)
		}
	}
	return out
}

// runLength is the number of blocks a single-replica file puts on one
// datanode before moving to the next, so sequential and random reads spread
// over the nodes while each run stays contiguous on disk.
const runLength = 128

// allocate allocates blocks index..index+count-1 of a file with rep replicas
// for tx. Called with n.mu held.
func (n *Namenode) allocate(tx *Txn, ino uint64, index, count uint64, rep int, pref []string) ([]wire.Extent, error) {
	// Preferences name identities to favour; "-identity" excludes one (a
	// client that just failed to write there).
	prefSet, exclude := map[string]bool{}, map[string]bool{}
	for _, p := range pref {
		if strings.HasPrefix(p, "-") {
			exclude[p[1:]] = true
		} else {
			prefSet[p] = true
		}
	}
	var live []*dnode
	for _, dn := range n.liveNodes() {
		if !exclude[dn.Identity] {
			live = append(live, dn)
		}
	}
	if rep > len(live) {
		return nil, fail(wire.ErrCodeUnavailable, "replication %d requested but only %d usable datanodes are alive", rep, len(live))
	}
	sort.Slice(live, func(i, j int) bool {
		pi, pj := prefSet[live[i].Identity], prefSet[live[j].Identity]
		if pi != pj {
			return pi
		}
		if rep > 1 && live[i].used.free() != live[j].used.free() {
			return live[i].used.free() > live[j].used.free()
		}
		return live[i].ID < live[j].ID
	})
	// Contiguity hints: where this file's blocks on each node end.
	hints := map[uint32]uint64{}
	for _, x := range n.blockList(tx, ino) {
		for _, r := range x.Replicas {
			hints[r.Node] = r.Start + uint64(x.Count)
		}
	}
	var out []wire.Extent
	for count > 0 {
		piece := count
		var set []*dnode
		if rep == 1 {
			group := index / runLength
			piece = min(count, (group+1)*runLength-index)
			set = []*dnode{live[int(group%uint64(len(live)))]}
		} else {
			set = live[:rep]
		}
		xs, err := n.allocPiece(tx, ino, set, live, index, piece, hints)
		if err != nil {
			return nil, err
		}
		out = append(out, xs...)
		index += piece
		count -= piece
	}
	return out, nil
}

// allocPiece allocates count blocks on the nodes of set (one replica each),
// replacing a full node by another live one.
func (n *Namenode) allocPiece(tx *Txn, ino uint64, set, live []*dnode, index, count uint64, hints map[uint32]uint64) ([]wire.Extent, error) {
	set = append([]*dnode(nil), set...)
	var out []wire.Extent
	for count > 0 {
		starts := make([]uint64, len(set))
		got := make([]uint64, len(set))
		for i := 0; i < len(set); i++ {
			s, g := set[i].used.alloc(count, hints[set[i].ID])
			if g == 0 {
				// Full: undo this round and substitute another node.
				for j := 0; j < i; j++ {
					set[j].used.clear(starts[j], got[j])
				}
				repl := n.substitute(set, live, set[i])
				if repl == nil {
					return nil, fail(wire.ErrCodeNoSpace, "no space: datanode %s is full and no other live datanode has room", set[i].Identity)
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
			if tx.allocated == nil {
				tx.allocated = map[uint32][]run{}
			}
			tx.allocated[dn.ID] = append(tx.allocated[dn.ID], run{node: dn.ID, start: starts[i], count: l, ino: ino, index: index})
			hints[dn.ID] = starts[i] + l
		}
		out = append(out, x)
		index += l
		count -= l
	}
	return out, nil
}

func (n *Namenode) substitute(set, live []*dnode, full *dnode) *dnode {
	in := map[*dnode]bool{}
	for _, d := range set {
		in[d] = true
	}
	for _, d := range live {
		if !in[d] && d != full && d.used.free() > 0 {
			return d
		}
	}
	return nil
}
