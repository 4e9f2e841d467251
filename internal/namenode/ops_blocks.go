package namenode

// Operations on block lists: open (attributes with the blocks of the same
// version), allocate, attach written blocks, drop failed replicas.

import (
	"errors"
	"fmt"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

func (n *Namenode) opBlocks(_ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	a := n.ns.attr(tx, q.Ino)
	if a != nil && !may(who, a, permRead) {
		return nil, denied(who, fmt.Sprintf("inode %d", q.Ino))
	}
	return n.openResponse(tx, who, q.Ino, fmt.Sprintf("inode %d", q.Ino))
}

// openResponse answers an open: the attributes of a file together with the
// block list of the same version (the size is that version's), so a reader
// never sees one version's length with another's blocks.
func (n *Namenode) openResponse(tx *Txn, who *auth.Identity, ino uint64, what string) (*wire.Response, error) {
	a := n.ns.attr(tx, ino)
	if a == nil {
		return nil, fail(wire.ErrCodeNotFound, "%s: no such file or directory", what)
	}
	out := cp(a)
	out.Blocksize = n.cfg.Blocksize
	if a.Type != wire.TypeFile {
		if tx != nil {
			n.ns.use(tx, ino)
		}
		return &wire.Response{Attr: out}, nil
	}
	if !may(who, a, permRead) {
		if tx != nil {
			n.ns.use(tx, ino)
		}
		// Opening a file one may only write is allowed; its blocks are not
		// handed out (Counters stays empty: no block list included).
		return &wire.Response{Attr: out}, nil
	}
	xs, size := n.ns.fileVersion(tx, ino)
	out.Size = size
	return n.ticketed(tx, &wire.Response{Attr: out, Extents: xs, Nodes: n.nodeList(), Counters: []uint64{wire.BlocksIncluded}}), nil
}

// dropBlocks removes blocks at index ≥ keep from ino's list in tx.
func (n *Namenode) dropBlocks(tx *Txn, ino uint64, keep uint64) {
	old := n.ns.blockList(tx, ino)
	var out []wire.Extent
	for _, x := range old {
		end := x.Index + uint64(x.Count)
		switch {
		case end <= keep:
			out = append(out, x)
		case x.Index >= keep:
			tx.freed = append(tx.freed, extentRuns([]wire.Extent{x})...)
		default:
			k := keep - x.Index
			head := wire.Extent{Index: x.Index, Count: uint32(k), CRC: x.CRC[:k], Gen: x.Gen}
			for _, r := range x.Replicas {
				head.Replicas = append(head.Replicas, r)
				tx.freed = append(tx.freed, run{node: r.Node, start: r.Start + k, count: uint64(x.Count) - k})
			}
			out = append(out, head)
		}
	}
	tx.setBlocks(ino, out)
}

func (n *Namenode) allocateOp(tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Count == 0 || q.Count > 1<<20 {
		return nil, fail(wire.ErrCodeInvalid, "allocate: bad block count %d", q.Count)
	}
	if q.Index > maxBlockIndex {
		return nil, fail(wire.ErrCodeInvalid, "allocate: block index %d too large", q.Index)
	}
	if err := n.mayWriteFile(tx, who, q.Ino); err != nil {
		return nil, err
	}
	a, err := n.ns.mutAttr(tx, q.Ino)
	if err != nil {
		return nil, err
	}
	want := q.Count * uint64(max(a.Rep, 1))
	// More than the cluster has free is the cluster's shortage, whatever
	// else stands in the way: say so, with the numbers.
	free, nodes := n.liveFree()
	outOfSpace := func() error {
		if f := n.freeingBlocks(); want <= free+f {
			return fail(wire.ErrCodeUnavailable, "allocate: %d blocks of %d bytes are needed and %d are free on %d live datanodes, but %d more %s (files removed or rewritten a moment ago): retry in a few seconds",
				want, n.cfg.Blocksize, free, nodes, f, wire.SpaceFreeing)
		}
		return fail(wire.ErrCodeNoSpace, "allocate: the cluster is out of space (no space left on its datanodes): %d blocks of %d bytes are needed (%d blocks, %d replicas), %d are free on %d live datanodes (%s; see 'plasma fsstat'; remove files or add datanodes)",
			want, n.cfg.Blocksize, q.Count, max(a.Rep, 1), free, nodes, n.roomReport())
	}
	// Too few datanodes alive (after a namenode restart, before they
	// register again, say) is a wait, not a full cluster: with none alive
	// the byte counts below are all zero and would say ENOSPC.
	if rep := max(int(a.Rep), 1); nodes < rep {
		return nil, fail(wire.ErrCodeUnavailable, "allocate: replication %d requested but only %d usable datanodes are alive (registering after a restart, or down: see 'plasma admin datanodes')", rep, nodes)
	}
	// The per-user limit counts bytes, as the datanodes do (space.go):
	// what the blocks will hold by the size the writer announced, whole
	// blocks without one.
	bs := uint64(n.cfg.Blocksize)
	wantBytes := want * bs
	if q.Size > 0 {
		wantBytes = max(committedBytes(q.Size, q.Index, q.Count, bs), q.Count*pageSize) * uint64(max(a.Rep, 1))
	}
	if lim := n.userAllocLimit(); n.txns.held(tx.user)+wantBytes > lim {
		if want > free {
			return nil, outOfSpace()
		}
		who := fmt.Sprintf("user %q", tx.user)
		if tx.user == "" {
			who = "anonymous clients (security level none)"
		}
		return nil, fail(wire.ErrCodeNoSpace, "allocate: no space for %s: %s held in uncommitted transactions and %s more would pass the per-user limit of %s (%d blocks of %d bytes; commit first, or raise the namenode's -user-alloc-limit)",
			who, sizeText(n.txns.held(tx.user)), sizeText(wantBytes), sizeText(lim), lim/bs, bs)
	}
	// On failure the allocator has given back whatever it took.
	// Size: the file's size when the writer flushes, so that blocks of
	// small files hold their pages rather than whole blocks until the
	// commit (space.go); a hint only, corrected at setblocks.
	xs, held, err := n.allocate(tx, q.Ino, q.Index, q.Count, int(a.Rep), q.Pref, n.newGen(), q.Size)
	var oe *opError
	if err != nil && errors.As(err, &oe) && oe.code == wire.ErrCodeNoSpace {
		if want > free {
			return nil, outOfSpace()
		}
		if f := n.freeingBlocks(); f >= want {
			// The cluster has room, but not where the blocks may go (a
			// rewrite places them by the old ones, whose datanodes hold
			// the versions being freed): those come back within a few
			// heartbeats, so this is a wait too.
			return nil, fail(wire.ErrCodeUnavailable, "allocate: %s; %d blocks %s (files removed or rewritten a moment ago): retry in a few seconds",
				oe.msg, f, wire.SpaceFreeing)
		}
		return nil, fail(wire.ErrCodeNoSpace, "allocate: %s (%s)", oe.msg, n.roomReport())
	}
	if err != nil {
		return nil, err
	}
	n.txns.charge(tx, held)
	return &wire.Response{Extents: n.withTickets(tx, xs, true), Nodes: n.nodeList()}, nil
}

// extendOp hands out append tickets for the committed last block of a
// file, partly filled, so that a small append writes only its bytes into
// that block in place (datanode.BlockStore.Extend) instead of a copy of
// the whole block. Only a file this transaction has not changed yet
// qualifies: then the committed version is the one whose bytes the
// tickets protect (they allow writing from its length on), and the
// transaction's exclusive lock keeps every other writer out until it ends.
// A refusal (ErrCodeInvalid) tells the client to copy on write instead.
func (n *Namenode) extendOp(tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if err := n.mayWriteFile(tx, who, q.Ino); err != nil {
		return nil, err
	}
	if _, changed := tx.inodes[q.Ino]; changed {
		if _, written := tx.blocks[q.Ino]; written {
			return nil, fail(wire.ErrCodeInvalid, "extend: inode %d was written in this transaction already", q.Ino)
		}
	}
	for _, r := range tx.extended {
		if r.ino == q.Ino {
			// One extension per transaction: two (two handles of the file)
			// could reach the datanodes in another order than they are
			// attached.
			return nil, fail(wire.ErrCodeInvalid, "extend: inode %d is being extended in this transaction already", q.Ino)
		}
	}
	a, err := n.ns.mutAttr(tx, q.Ino)
	if err != nil {
		return nil, err
	}
	in := n.ns.inodes[q.Ino]
	if in == nil {
		return nil, fail(wire.ErrCodeInvalid, "extend: inode %d has no committed version", q.Ino)
	}
	bs := int64(n.cfg.Blocksize)
	size := in.attr.Size
	if a.Size != size || size%bs == 0 || uint64((size-1)/bs) != q.Index {
		return nil, fail(wire.ErrCodeInvalid, "extend: block %d of inode %d is not its partly filled last block", q.Index, q.Ino)
	}
	var x wire.Extent
	found := false
	for _, e := range in.blocks {
		if e.Index <= q.Index && q.Index < e.Index+uint64(e.Count) {
			k := q.Index - e.Index
			x = wire.Extent{Index: q.Index, Count: 1, CRC: []uint32{e.CRC[k]}, Gen: e.Gen}
			for _, r := range e.Replicas {
				x.Replicas = append(x.Replicas, wire.Run{Node: r.Node, Start: r.Start + k})
			}
			found = true
			break
		}
	}
	if !found || (x.Gen == 0 && n.cfg.TicketKey != nil) {
		return nil, fail(wire.ErrCodeInvalid, "extend: block %d of inode %d is a hole or predates block generations", q.Index, q.Ino)
	}
	from := uint64(size - int64(q.Index)*bs)
	for _, r := range x.Replicas {
		tx.extended = append(tx.extended, run{node: r.Node, start: r.Start, count: 1, ino: q.Ino, index: q.Index, gen: x.Gen})
		n.noteDataNode(tx, r.Node)
	}
	if n.cfg.TicketKey != nil {
		exp := time.Now().Add(n.cfg.TicketLifetime).Unix()
		seq := n.newGen()
		x.Tickets = make([][]byte, len(x.Replicas))
		for j, r := range x.Replicas {
			t := auth.Ticket{Tag: tx.tag, Node: r.Node, Start: r.Start, Count: 1, Append: true, From: from, Expiry: exp, Gen: x.Gen, Seq: seq}
			x.Tickets[j] = n.seal(t)
			if tx.ticketed == nil {
				tx.ticketed = map[uint32]bool{}
			}
			tx.ticketed[r.Node] = true
		}
	}
	return &wire.Response{Extents: []wire.Extent{x}, Nodes: n.nodeList(), Counters: []uint64{from}}, nil
}

// extendedAs reports whether tx may attach block start of node, extended
// in place, as file block index of ino, and marks it attached.
func (tx *Txn) extendedAs(node uint32, start, count, ino, index, gen uint64) bool {
	if count != 1 {
		return false
	}
	for i, r := range tx.extended {
		if r.node == node && r.start == start && r.ino == ino && r.index == index && r.gen == gen {
			tx.extended[i].attached = true
			return true
		}
	}
	return false
}

// replaces reports whether tx's writes replace blocks start..start+count-1
// of node: it allocated them, or extends that one block in place.
func (tx *Txn) replaces(node uint32, start, count uint64) bool {
	if tx.ownsRun(node, start, count) {
		return true
	}
	if count != 1 {
		return false
	}
	for _, r := range tx.extended {
		if r.attached && r.node == node && r.start == start {
			return true
		}
	}
	return false
}

// references reports whether block start of node is in the block list xs.
func references(xs []wire.Extent, node uint32, start uint64) bool {
	for _, x := range xs {
		for _, r := range x.Replicas {
			if r.Node == node && r.Start <= start && start < r.Start+uint64(x.Count) {
				return true
			}
		}
	}
	return false
}

// liveFree returns the free blocks of the datanodes blocks may be
// allocated on, and how many datanodes those are.
func (n *Namenode) liveFree() (free uint64, nodes int) {
	for _, dn := range n.nodes.live() {
		free += dn.room(uint64(n.cfg.Blocksize))
		nodes++
	}
	return free, nodes
}

// userAllocLimit is how many blocks one user may hold in uncommitted
// transactions: the configured limit, or seven eighths of the cluster's
// blocks, so one user's transactions cannot take all the space.
func (n *Namenode) userAllocLimit() uint64 {
	if n.cfg.UserAllocLimit > 0 {
		return n.cfg.UserAllocLimit * uint64(n.cfg.Blocksize)
	}
	capacity, _ := n.nodeBytes()
	return capacity - capacity/8
}

// allocatedAs reports whether tx allocated blocks start..start+count-1 of
// node for file ino at file block index (so an allocated run can be
// attached to one place only: never to a second file, never twice).
func (tx *Txn) allocatedAs(node uint32, start, count, ino, index, gen uint64) bool {
	for _, r := range tx.allocated[node] {
		if r.ino == ino && r.gen == gen && r.start <= start && start+count <= r.start+r.count && index-r.index == start-r.start && index >= r.index {
			return true
		}
	}
	return false
}

// ownsRun reports whether tx allocated blocks start..start+count-1 of node.
func (tx *Txn) ownsRun(node uint32, start, count uint64) bool {
	for _, r := range tx.allocated[node] {
		if r.start <= start && start+count <= r.start+r.count {
			return true
		}
	}
	return false
}

// mayWriteFile checks, without locking, that ino is a regular file who may
// write.
func (n *Namenode) mayWriteFile(tx *Txn, who *auth.Identity, ino uint64) error {
	a := n.ns.attr(tx, ino)
	if a == nil {
		return fail(wire.ErrCodeNotFound, "inode %d: no such file", ino)
	}
	if a.Type != wire.TypeFile {
		return fail(wire.ErrCodeIsDir, "inode %d is not a regular file", ino)
	}
	if !may(who, a, permWrite) {
		return denied(who, fmt.Sprintf("write to inode %d", ino))
	}
	return nil
}

func (n *Namenode) setBlocks(tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if err := n.mayWriteFile(tx, who, q.Ino); err != nil {
		return nil, err
	}
	a := n.ns.attr(tx, q.Ino)
	for i := range q.Extents {
		q.Extents[i].Tickets = nil // never stored
	}
	if q.Flags&wire.FlagSize != 0 {
		if err := n.checkSize(q.Size, fmt.Sprintf("setblocks: inode %d", q.Ino)); err != nil {
			return nil, err
		}
	}
	size := a.Size
	if q.Flags&wire.FlagSize != 0 {
		size = q.Size
	}
	bs := uint64(n.cfg.Blocksize)
	for _, x := range q.Extents {
		if x.Count == 0 || len(x.CRC) != int(x.Count) || len(x.Replicas) == 0 || len(x.Replicas) > wire.MaxReplica {
			return nil, fail(wire.ErrCodeInvalid, "setblocks: extent at index %d lacks checksums or replicas", x.Index)
		}
		if x.Index > maxBlockIndex || (x.Index+uint64(x.Count)-1)*bs >= uint64(size) {
			return nil, fail(wire.ErrCodeInvalid, "setblocks: inode %d: blocks %d-%d lie beyond the file size %d", q.Ino, x.Index, x.Index+uint64(x.Count)-1, size)
		}
		nodes := map[uint32]bool{}
		for _, r := range x.Replicas {
			if nodes[r.Node] {
				return nil, fail(wire.ErrCodeInvalid, "setblocks: blocks %d+%d have two replicas on datanode %d", x.Index, x.Count, r.Node)
			}
			nodes[r.Node] = true
			if !tx.allocatedAs(r.Node, r.Start, uint64(x.Count), q.Ino, x.Index, x.Gen) && !tx.extendedAs(r.Node, r.Start, uint64(x.Count), q.Ino, x.Index, x.Gen) {
				return nil, fail(wire.ErrCodeInvalid, "setblocks: blocks %d+%d on datanode %d were not allocated by this transaction for inode %d blocks %d-%d", r.Start, x.Count, r.Node, q.Ino, x.Index, x.Index+uint64(x.Count)-1)
			}
		}
	}
	a, err := n.ns.mutAttr(tx, q.Ino)
	if err != nil {
		return nil, err
	}
	merged, freed := mergeBlocks(n.ns.blockList(tx, q.Ino), q.Extents)
	if len(tx.extended) > 0 {
		// A block extended in place replaces itself: it stays.
		kept := freed[:0]
		for _, f := range freed {
			if !references(merged, f.node, f.start) {
				kept = append(kept, f)
			}
		}
		freed = kept
	}
	tx.freed = append(tx.freed, freed...)
	tx.setBlocks(q.Ino, merged)
	if q.Flags&wire.FlagSize != 0 {
		a.Size = q.Size
	}
	n.trimReservations(tx, q.Ino, a.Size)
	a.Seq++
	a.Mtime = time.Now().UnixNano()
	a.Ctime = a.Mtime
	return &wire.Response{}, nil
}

func maxFileSize(bs uint32) int64 { return int64(maxBlockIndex) * int64(bs) }

// checkSize refuses a file size (set by setattr or setblocks) that is
// negative or past the largest file (what names the file in messages).
func (n *Namenode) checkSize(size int64, what string) error {
	if size < 0 || size > maxFileSize(n.cfg.Blocksize) {
		return fail(wire.ErrCodeInvalid, "%s: bad size %d", what, size)
	}
	return nil
}

// dropReplicas removes, from the blocks this transaction wrote, the
// replicas on the given datanodes (identities), which could not make them
// durable. Committed replicas are never touched, and every block must keep
// at least one replica; the file is then under-replicated (fsck says so)
// but the commit can go ahead with the data that is safe.
func (n *Namenode) dropReplicas(tx *Txn, identities []string) error {
	dead := map[uint32]bool{}
	for _, id := range identities {
		if dn := n.nodes.lookup(id); dn != nil {
			dead[dn.ID] = true
		}
	}
	for ino, xs := range tx.blocks {
		var out []wire.Extent
		for _, x := range xs {
			// Committed blocks may share an extent with new ones; decide
			// block by block where an extent is only partly this
			// transaction's.
			for _, piece := range splitForDrop(tx, x, dead) {
				keep := piece.Replicas[:0:0]
				for _, r := range piece.Replicas {
					if dead[r.Node] && tx.replaces(r.Node, r.Start, uint64(piece.Count)) {
						if !tx.ownsRun(r.Node, r.Start, uint64(piece.Count)) {
							// Extended in place but not made durable there: the
							// new version leaves that replica behind.
							tx.freed = append(tx.freed, run{node: r.Node, start: r.Start, count: 1})
						}
						continue
					}
					keep = append(keep, r)
				}
				if len(keep) == 0 {
					return fail(wire.ErrCodeUnavailable, "inode %d: blocks %d-%d have no replica left on a live datanode", ino, piece.Index, piece.Index+uint64(piece.Count)-1)
				}
				piece.Replicas = keep
				out = appendExtent(out, piece)
			}
		}
		tx.blocks[ino] = out
	}
	return nil
}

// splitForDrop returns x whole, or as single blocks when a replica on a
// dead datanode is only partly owned by tx.
func splitForDrop(tx *Txn, x wire.Extent, dead map[uint32]bool) []wire.Extent {
	whole := true
	for _, r := range x.Replicas {
		if dead[r.Node] && !tx.replaces(r.Node, r.Start, uint64(x.Count)) {
			whole = false
		}
	}
	if whole || x.Count == 1 {
		return []wire.Extent{x}
	}
	out := make([]wire.Extent, x.Count)
	for k := uint64(0); k < uint64(x.Count); k++ {
		p := wire.Extent{Index: x.Index + k, Count: 1, CRC: []uint32{x.CRC[k]}, Gen: x.Gen}
		for _, r := range x.Replicas {
			p.Replicas = append(p.Replicas, wire.Run{Node: r.Node, Start: r.Start + k})
		}
		out[k] = p
	}
	return out
}
