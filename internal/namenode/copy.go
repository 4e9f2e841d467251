package namenode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// copyTask copies count blocks of a file (from file block index) from one
// replica to newly allocated blocks on another datanode.
type copyTask struct {
	ino      uint64
	index    uint64
	count    uint32
	crc      []uint32 // the committed checksums of the blocks
	gen      uint64   // the extent's allocation generation
	src, dst wire.Run
	// leaving is the datanode the copy replaces a replica of (draining
	// or dead; 0: none), for the per-datanode queue lengths.
	leaving          uint32
	balanceFrom      uint32 // a balancing move off this datanode (0: none)
	srcAddr, dstAddr string
	readTicket       []byte
	writeTicket      []byte
	started          time.Time
	// srcDamaged is the first block (from src.Start) the source refused
	// to send because it failed its checksum there, if srcSuspect.
	srcDamaged uint64
	srcSuspect bool
}

func (t *copyTask) String() string {
	return fmt.Sprintf("inode %d blocks %d-%d: datanode %d -> %d", t.ino, t.index, t.index+uint64(t.count)-1, t.src.Node, t.dst.Node)
}

// replicationTag names the replicator in its tickets: even, so never a
// transaction's tag (those are odd), and never revoked; the tickets expire.
const replicationTag = 2

// copyTimeout bounds one copy task (its blocks and the destination's sync).
const copyTimeout = 2 * time.Minute

// scheduleCopies starts copy tasks for the queued extents, most endangered
// first, as far as the datanodes' bounds allow. Called with n.mu held.
func (n *Namenode) scheduleCopies() {
	bs := uint64(n.cfg.Blocksize)
	rp := n.repl
	now := time.Now()
	live := n.nodes.live()
	if len(rp.queue) == 0 || !slices.ContainsFunc(live, func(dn *dnode) bool { return rp.busy[dn.ID] < rp.perNode }) {
		return // nothing to do, or no destination free: the queue is not even sorted
	}
	inflight := map[uint64][]*copyTask{}
	for t := range rp.tasks {
		inflight[t.ino] = append(inflight[t.ino], t)
	}
	for _, it := range rp.queued() {
		if overlaps(inflight[it.ino], it.x) {
			continue // scheduled already; its file is scanned again once the copy ends
		}
		src := n.pickSource(it.x, now)
		if it.from != 0 {
			src = n.balanceSource(it)
		}
		if src == nil {
			continue
		}
		dst := n.pickDestination(it.x, live)
		if dst == nil || (it.from != 0 && dst.room(bs) <= n.nodes.get(it.from).room(bs)) {
			continue // a balancing move goes to an emptier datanode only
		}
		start, k := dst.alloc(uint64(min(it.x.Count, maxTaskBlocks)), 0, func(k uint64) uint64 { return k * bs })
		if k == 0 {
			continue
		}
		if dst.sparse() {
			dst.space.reserved += k * bs // until finishCopy
		}
		t := &copyTask{ino: it.ino, index: it.x.Index, count: uint32(k), crc: it.x.CRC[:k], gen: it.x.Gen,
			src: *src, dst: wire.Run{Node: dst.ID, Start: start}, started: now}
		for _, r := range it.x.Replicas {
			if st := n.replicaState(r, it.x, now); st == repLeaving || st == repGone {
				t.leaving = r.Node
				break
			}
		}
		t.balanceFrom = it.from
		t.srcAddr, t.dstAddr = n.nodes.get(src.Node).info.Addr, dst.info.Addr
		n.copyTickets(t)
		rp.tasks[t] = struct{}{}
		inflight[t.ino] = append(inflight[t.ino], t)
		rp.busy[src.Node]++
		rp.busy[dst.ID]++
		n.wg.Add(1)
		go n.runCopy(t)
	}
}

// pickSource returns a replica of x on a live datanode with room for
// another copy (a good one rather than a leaving one; at random among
// equals, so a damaged replica is not asked for ever), or nil.
func (n *Namenode) pickSource(x wire.Extent, now time.Time) *wire.Run {
	rp := n.repl
	var best []wire.Run
	bestState := repAway
	for _, r := range x.Replicas {
		st := n.replicaState(r, x, now)
		if (st != repGood && st != repLeaving) || rp.busy[r.Node] >= rp.perNode {
			continue
		}
		switch {
		case st < bestState:
			best, bestState = []wire.Run{r}, st
		case st == bestState:
			best = append(best, r)
		}
	}
	if len(best) == 0 {
		return nil
	}
	r := best[rand.IntN(len(best))]
	return &r
}

// balanceSource returns the replica a balancing move copies: the one on
// the over-full datanode, if it has room for another copy.
func (n *Namenode) balanceSource(it repItem) *wire.Run {
	for _, r := range it.x.Replicas {
		if r.Node == it.from && n.repl.busy[r.Node] < n.repl.perNode {
			return &r
		}
	}
	return nil
}

// pickDestination returns the live datanode in service with the most free
// blocks that holds no replica of x and has room for another copy, or nil.
func (n *Namenode) pickDestination(x wire.Extent, live []*dnode) *dnode {
	bs := uint64(n.cfg.Blocksize)
	var best *dnode
	for _, dn := range live {
		if n.repl.draining[dn.ID] || n.repl.busy[dn.ID] >= n.repl.perNode || dn.room(bs) == 0 {
			continue
		}
		if slices.ContainsFunc(x.Replicas, func(r wire.Run) bool { return r.Node == dn.ID }) {
			continue
		}
		if best == nil || dn.room(bs) > best.room(bs) {
			best = dn
		}
	}
	return best
}

// copyTickets gives t a read ticket for its source and a write ticket,
// of a new generation, for its destination (none without a ticket key).
// The new replica holds the new generation: a datanode never lets a block
// go back to an older one.
func (n *Namenode) copyTickets(t *copyTask) {
	if n.cfg.TicketKey == nil {
		return
	}
	exp := time.Now().Add(min(n.cfg.TicketLifetime, copyTimeout+time.Minute)).Unix()
	rt := auth.Ticket{Tag: replicationTag, Node: t.src.Node, Start: t.src.Start, Count: uint64(t.count), Expiry: exp, Gen: n.currentGen(), MinGen: t.gen}
	g := n.newGen()
	wt := auth.Ticket{Tag: replicationTag, Node: t.dst.Node, Start: t.dst.Start, Count: uint64(t.count), Write: true, Expiry: exp, Gen: g, Seq: g}
	t.readTicket, t.writeTicket = n.seal(rt), n.seal(wt)
}

// runCopy carries out t without the namenode lock and then settles it.
func (n *Namenode) runCopy(t *copyTask) {
	defer n.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), copyTimeout)
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := n.copyBlocks(ctx, t)
	n.mu.Lock()
	n.finishCopy(t, err)
	n.mu.Unlock()
	n.repl.wake()
}

// copyBlocks has the source send each block to the destination (requests
// pipelined on one connection), then makes them durable there.
func (n *Namenode) copyBlocks(ctx context.Context, t *copyTask) error {
	answered := uint64(0)
	err := n.dataExchangeAnswers(ctx, t.srcAddr, func(k int) *wire.DataReq {
		if k == int(t.count) {
			return nil
		}
		return &wire.DataReq{Op: wire.DataReplicate, Block: t.src.Start + uint64(k), CRC: t.crc[k], Ticket: t.readTicket,
			Chain: []wire.Hop{{Addr: t.dstAddr, Block: t.dst.Start + uint64(k), Ticket: t.writeTicket}}}
	}, func(p *wire.DataResp) {
		// ErrCodeInvalid: the source's own replica failed its checksum
		// (the destination's refusals come back as other codes).
		if p.Status == wire.ErrCodeInvalid && !t.srcSuspect {
			t.srcDamaged, t.srcSuspect = answered, true
		}
		answered++
	})
	if err != nil {
		return fmt.Errorf("copy from datanode %d (%s): %w", t.src.Node, t.srcAddr, err)
	}
	err = n.dataExchange(ctx, t.dstAddr, func(k int) *wire.DataReq {
		if k > 0 {
			return nil
		}
		return &wire.DataReq{Op: wire.DataSync}
	})
	if err != nil {
		return fmt.Errorf("sync datanode %d (%s): %w", t.dst.Node, t.dstAddr, err)
	}
	return nil
}

// dataExchange sends the requests next yields (until nil) to the datanode
// at addr and reads their answers; the first refusal is the error.
func (n *Namenode) dataExchange(ctx context.Context, addr string, next func(k int) *wire.DataReq) error {
	return n.dataExchangeAnswers(ctx, addr, next, nil)
}

// dataExchangeAnswers is dataExchange that also hands each answer, in
// order, to got (if not nil).
func (n *Namenode) dataExchangeAnswers(ctx context.Context, addr string, next func(k int) *wire.DataReq, got func(*wire.DataResp)) error {
	raw, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	nc, err := auth.Client(raw, n.cfg.DataSecurity, n.cfg.Credential, auth.RoleDatanode)
	if err != nil {
		return err
	}
	defer nc.Close()
	w := bufio.NewWriter(nc)
	sent := 0
	for q := next(0); q != nil; q = next(sent) {
		if err := wire.WriteDataReq(w, q); err != nil {
			return err
		}
		sent++
	}
	if err := w.Flush(); err != nil {
		return err
	}
	r := bufio.NewReader(nc)
	var first error
	for range sent {
		p, err := wire.ReadDataResp(r)
		if err != nil {
			return errors.Join(first, err)
		}
		if p.Status != wire.OK && first == nil {
			first = errors.New(p.Msg)
		}
		if got != nil {
			got(p)
		}
	}
	return first
}

// finishCopy attaches t's new replica if the copy succeeded and the
// blocks are still the ones it copied, and frees its blocks otherwise.
// Called with n.mu held.
func (n *Namenode) finishCopy(t *copyTask, err error) {
	rp := n.repl
	delete(rp.tasks, t)
	rp.busy[t.src.Node]--
	rp.busy[t.dst.Node]--
	rp.dirty[t.ino] = true
	if dn := n.nodes.get(t.dst.Node); dn != nil {
		// What it wrote, settled or not, the datanode counts from its
		// next heartbeats.
		bs := uint64(n.cfg.Blocksize)
		dn.unreserve(uint64(t.count), bs, uint64(t.count)*bs)
	}
	in := n.ns.inodes[t.ino]
	var xs []wire.Extent
	switch {
	case err != nil:
	case in == nil:
		err = errors.New("the file was deleted")
	case n.busyInodes()[t.ino]:
		err = errors.New("a transaction is changing the file")
	default:
		var ok bool
		if xs, ok = withReplica(in.blocks, t); !ok {
			err = errors.New("the blocks changed meanwhile")
		}
	}
	if err != nil {
		rp.failed++
		n.log.Warn("re-replication copy not attached", "task", t.String(), "err", err)
		n.suspectCopySource(t) // copydamage.go
		if dn := n.nodes.get(t.dst.Node); dn != nil {
			dn.freeSlots(t.dst.Start, uint64(t.count)) // referenced nowhere
		}
		return
	}
	in.blocks = xs
	ch := &meta.Change{Blocks: map[uint64][]meta.Extent{t.ino: storeExtents(xs)}}
	n.fsck.note(ch)
	n.deferChange(ch)
	rp.copied += uint64(t.count)
	if t.balanceFrom != 0 {
		rp.moved[t.balanceFrom] += int64(t.count)
	}
}

// withReplica returns xs with t's destination added as a replica of t's
// blocks, or false if those blocks are no longer the version t copied
// (other checksums or generation, the source replica gone, or the
// destination holding one already).
func withReplica(xs []wire.Extent, t *copyTask) ([]wire.Extent, bool) {
	i := slices.IndexFunc(xs, func(x wire.Extent) bool {
		return x.Index <= t.index && t.index+uint64(t.count) <= x.Index+uint64(x.Count)
	})
	if i < 0 {
		return nil, false
	}
	x := xs[i]
	off := t.index - x.Index
	if x.Gen != t.gen || !slices.Equal(x.CRC[off:off+uint64(t.count)], t.crc) {
		return nil, false
	}
	if !slices.Contains(x.Replicas, wire.Run{Node: t.src.Node, Start: t.src.Start - off}) ||
		slices.ContainsFunc(x.Replicas, func(r wire.Run) bool { return r.Node == t.dst.Node }) {
		return nil, false
	}
	out := append([]wire.Extent(nil), xs[:i]...)
	for _, p := range splitExtent(x, off, uint64(t.count)) {
		if p.Index == t.index {
			p.Replicas = append(slices.Clip(p.Replicas), t.dst)
		}
		out = appendExtent(out, p)
	}
	for _, p := range xs[i+1:] {
		out = appendExtent(out, p)
	}
	return out, true
}

// splitExtent cuts x into up to three pieces: before block off, the count
// blocks from off, and after them.
func splitExtent(x wire.Extent, off, count uint64) []wire.Extent {
	piece := func(from, n uint64) wire.Extent {
		p := wire.Extent{Index: x.Index + from, Count: uint32(n), CRC: x.CRC[from : from+n : from+n], Gen: x.Gen,
			Replicas: make([]wire.Run, len(x.Replicas))}
		for j, r := range x.Replicas {
			p.Replicas[j] = wire.Run{Node: r.Node, Start: r.Start + from}
		}
		return p
	}
	var out []wire.Extent
	if off > 0 {
		out = append(out, piece(0, off))
	}
	out = append(out, piece(off, count))
	if rest := uint64(x.Count) - off - count; rest > 0 {
		out = append(out, piece(off+count, rest))
	}
	return out
}
