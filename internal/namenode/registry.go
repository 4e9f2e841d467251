package namenode

import (
	"fmt"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
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
	scrub    scrubReport
	space    nodeSpace
}

func (d *dnode) nodeInfo() wire.NodeInfo {
	ni := d.info
	ni.ID = d.ID
	ni.Identity = d.Identity
	ni.Blocks = d.Blocks
	ni.Used = d.used.nused
	ni.Alive = d.alive
	// In bytes, for every datanode (space.go); blocksize from the
	// volume's registration. A sparse volume's Blocks and Used, which
	// clients show multiplied by the blocksize, are whole blocks of its
	// bytes rather than its slots.
	if bs := uint64(d.info.Blocksize); d.sparse() && bs > 0 {
		ni.Capacity, ni.UsedBytes = d.capacityBytes(bs), min(d.usedBytes(bs), d.capacityBytes(bs))
		ni.Blocks, ni.Used = ni.Capacity/bs, min(ni.Capacity/bs, (ni.UsedBytes+bs-1)/bs)
	}
	ni.Enabled = d.Enabled
	return ni
}

// namespace is the namespace id of the store ("" if it has none).
func (n *Namenode) namespace() string {
	if s, ok := n.cfg.Store.(meta.Namespacer); ok {
		return s.Namespace()
	}
	return ""
}

// registerAsync admits a datanode that connected on c (request id, q). It
// checks the registration under n.mu; a new datanode, or one whose volume
// changed size, is recorded by the committer like a commit, and becomes
// visible and alive, and is answered, only once that record is durable.
func (n *Namenode) registerAsync(c *conn, id uint64, q *wire.Request) {
	n.mu.Lock()
	req, resp := n.prepareRegister(c, id, q)
	n.mu.Unlock()
	if req != nil {
		n.cm.submit(req, nil)
		return
	}
	c.send(id, resp)
}

// prepareRegister returns either the store change to queue (with a reply
// that admits the datanode once it is durable) or an immediate answer.
// Called with n.mu held.
func (n *Namenode) prepareRegister(c *conn, id uint64, q *wire.Request) (*commitReq, *wire.Response) {
	refuse := func(code wire.Code, format string, args ...any) (*commitReq, *wire.Response) {
		return nil, &wire.Response{Code: code, Msg: fmt.Sprintf(format, args...)}
	}
	if who := c.who; who != nil && who.Role != auth.RoleDatanode {
		return refuse(wire.ErrCodePerm, "register: only datanodes may register (%s is a %s)", who.User, who.Role)
	}
	ni := q.Node
	if ni == nil {
		return refuse(wire.ErrCodeInvalid, "register without node")
	}
	if ni.Identity == "" {
		return refuse(wire.ErrCodeInvalid, "datanode registration without identity")
	}
	if ni.Cluster != n.cfg.Cluster {
		return refuse(wire.ErrCodeInvalid, "datanode %s belongs to cluster %q, this namenode serves cluster %q", ni.Identity, ni.Cluster, n.cfg.Cluster)
	}
	if ni.Blocksize != n.cfg.Blocksize {
		return refuse(wire.ErrCodeInvalid, "datanode %s has blocksize %d, the cluster uses %d: re-initialise it with --blocksize %d", ni.Identity, ni.Blocksize, n.cfg.Blocksize, n.cfg.Blocksize)
	}
	if ni.Blocks == 0 {
		return refuse(wire.ErrCodeInvalid, "datanode %s has no blocks", ni.Identity)
	}
	ns := n.namespace()
	if ns != "" && ni.Namespace != "" && ni.Namespace != ns {
		// Its blocks belong to another namespace: admitting it would make
		// them free space here. The answer carries this namespace's id
		// so the datanode can explain.
		n.log.Error("datanode of another namespace refused", "node", ni.Identity, "addr", ni.Addr, "volume_namespace", ni.Namespace, "namespace", ns)
		return nil, &wire.Response{Code: wire.ErrCodeInvalid, Nodes: []wire.NodeInfo{{Namespace: ns}},
			Msg: fmt.Sprintf("datanode volume %s belongs to namespace %s, this namenode serves namespace %s (its database was replaced or formatted anew?): "+
				"restore the namenode's database, or re-initialise the volume to reuse it here (its data is lost)", ni.Identity, ni.Namespace, ns)}
	}
	if msg := n.refuseRemoved(ni.Identity); msg != "" {
		return refuse(wire.ErrCodeInvalid, "%s", msg)
	}
	if n.nodes.reserved(ni.Identity) {
		return refuse(wire.ErrCodeUnavailable, "datanode identity %s is being registered already", ni.Identity)
	}
	dn := n.nodes.lookup(ni.Identity)
	if dn != nil && dn.alive && dn.conn != nil && dn.conn != c {
		return refuse(wire.ErrCodeExists, "datanode identity %s is already served by the live datanode at %s", ni.Identity, dn.info.Addr)
	}
	var rec meta.Datanode
	switch {
	case dn == nil:
		rec = meta.Datanode{ID: n.nodes.nextID(), Identity: ni.Identity, Blocks: ni.Blocks, Enabled: true}
	case ni.Blocks != dn.Blocks:
		if ni.Blocks < dn.used.size && dn.used.firstUsedFrom(ni.Blocks) < dn.used.size {
			return refuse(wire.ErrCodeInvalid, "datanode %s shrank to %d blocks but blocks beyond that are in use", ni.Identity, ni.Blocks)
		}
		rec = dn.Datanode
		rec.Blocks = ni.Blocks
	default:
		// Known, unchanged: nothing to write.
		out := n.admit(dn, c, ni, ns, q.Extents)
		journal, more := n.journalFor(dn.ID, c)
		return nil, &wire.Response{Nodes: []wire.NodeInfo{out}, Counters: n.registrationCounters(n.registrationFloor(), more), Journal: journal}
	}
	// Until the record is durable the datanode is invisible: not listed,
	// given no blocks, and its id is reserved here. A dead datanode that
	// grew or shrank gets no blocks either (it is not alive).
	n.nodes.reserve(ni.Identity, rec.ID)
	info, slots := *ni, q.Extents
	return &commitReq{change: &meta.Change{PutNodes: []meta.Datanode{rec}}, reply: func(err error) {
		// Called by the committer once the record is durable (in relaxed
		// mode: applied, before any commit that could name the datanode).
		n.mu.Lock()
		n.nodes.unreserve(rec.Identity)
		if err != nil {
			n.mu.Unlock()
			c.sendAsync(id, &wire.Response{Code: wire.ErrCodeInternal, Msg: fmt.Sprintf("record datanode %s: %v", rec.Identity, err)})
			return
		}
		dn := n.nodes.lookup(rec.Identity)
		if dn == nil {
			dn = n.nodes.add(rec)
		} else {
			dn.Blocks = rec.Blocks
			dn.used.resize(rec.Blocks)
		}
		out := n.admit(dn, c, &info, ns, slots)
		floor := n.registrationFloor() // under n.mu: below every ticket for it from now on
		journal, more := n.journalFor(dn.ID, c)
		n.mu.Unlock()
		c.sendAsync(id, &wire.Response{Nodes: []wire.NodeInfo{out}, Counters: n.registrationCounters(floor, more), Journal: journal})
	}}, nil
}

// admit makes a recorded datanode alive on c and returns the answer to
// its registration; slots is a sparse datanode's report of its slots
// holding pages (keptslots.go). Called with n.mu held.
func (n *Namenode) admit(dn *dnode, c *conn, ni *wire.NodeInfo, ns string, slots []wire.Extent) wire.NodeInfo {
	dn.info = *ni
	dn.readmitted()
	if k := dn.reconcileSlots(slots); k > 0 {
		n.log.Info("releasing slots that hold pages no file holds", "node", dn.Identity, "slots", k)
	}
	dn.lastSeen = time.Now()
	select {
	case <-c.done:
		// The connection closed meanwhile: recorded, but not alive.
		dn.alive, dn.conn = false, nil
	default:
		dn.alive, dn.conn = true, c
		n.log.Info("datanode registered", "node", dn.Identity, "id", dn.ID, "addr", ni.Addr, "blocks", ni.Blocks)
	}
	out := dn.nodeInfo()
	out.Namespace = ns
	return out
}

// connClosed marks the datanodes registered over c dead.
func (n *Namenode) connClosed(c *conn) {
	for _, dn := range n.nodes.disconnect(c) {
		n.log.Warn("datanode disconnected, marking dead", "node", dn.Identity)
	}
}

func (n *Namenode) nodeList() []wire.NodeInfo { return n.nodes.list() }

func (n *Namenode) liveNodes() []*dnode { return n.nodes.live() }
