package namenode

// Re-replication: the namenode keeps every file's blocks at the file's
// replication by itself. A background scan (replicationScan) classifies
// each extent's replicas by the state of their datanodes (every file when
// a datanode's state changed, else only the files commits or copies
// touched since the last scan), trims replicas a
// block no longer needs at once (a commit of the new block list; their
// blocks are freed once that commit is durable and no transaction that
// could read them is left), and queues the blocks that lack replicas, the
// most endangered first. Copies are made by the datanodes: the namenode
// asks one holding a good replica to send it to a datanode chosen by free
// space (DataReplicate, with a read ticket for the source and a write
// ticket for the new blocks), syncs the destination, and attaches the new
// replica with a commit if the block is still the one it copied
// (copy.go). Work is bounded per datanode (Config.CopiesPerNode copies in
// flight, as source or destination).

import (
	"cmp"
	"slices"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// replicaState is what a replica is worth, by the state of its datanode.
type replicaState uint8

const (
	repGood    replicaState = iota // live datanode in service: counted, a source
	repLeaving                     // live but draining (or disabled and draining): a source, not counted
	repAway                        // dead for less than DeadAfter: counted (it may come back), not a source
	repGone                        // dead for longer, or unknown: neither
)

// maxTaskBlocks bounds the blocks of one copy task (one commit each).
const maxTaskBlocks = 32

// scanInterval is how often the replicator looks at the files that
// changed, when nothing wakes it earlier (a copy ending); fullScanInterval
// how often it looks at every file even if no datanode changed state (to
// retry what failed).
const (
	scanInterval     = time.Second
	fullScanInterval = time.Minute
)

// replicator is the namenode's re-replication state.
//
// Lock discipline: guarded by Namenode.mu, except kick (a channel).
type replicator struct {
	deadAfter time.Duration
	perNode   int
	started   time.Time // a datanode not seen since start counts as seen then
	draining  map[uint32]bool
	tasks     map[*copyTask]struct{}
	busy      map[uint32]int // copy tasks each datanode takes part in
	kick      chan struct{}
	// trimFrees holds the blocks each trim change frees, until the
	// committer takes the change (nnStore.internal): then they wait in
	// Namenode.frees for that batch to be durable.
	trimFrees map[*meta.Change][]run
	// queue holds each file's extents that lack replicas, from the
	// file's last scan; dirty the files to scan again.
	queue    map[uint64][]repItem
	dirty    map[uint64]bool
	nodeSig  []uint64  // the datanodes' states at the last full scan
	lastFull time.Time // when it was
	last     repScan   // the totals of the last full scan
	// bad holds the replicas (of one block each) datanodes reported
	// damaged, with the checksum they failed: such a replica counts for
	// nothing if that is its committed checksum. forceFull asks for a
	// full scan.
	bad       map[wire.Run]uint32
	verifying map[wire.Run]bool // replicas readers reported damaged, being verified (readerreport.go)
	forceFull bool
	balancing bool // plasma admin balance asked, not done yet
	// moved counts the blocks balancing moves attached off each datanode
	// since the last full scan, which counted them still there.
	moved   map[uint32]int64
	copied  uint64 // blocks copied and attached since start
	trimmed uint64 // replicas (blocks) trimmed since start
	failed  uint64 // copy tasks that failed
}

// repScan is what a full scan counted.
type repScan struct {
	at      time.Time
	under   uint64            // blocks with fewer good replicas than wanted
	lost    uint64            // blocks with no replica that can be read now
	waiting uint64            // under-replicated blocks waiting for a dead datanode's DeadAfter
	blocks  map[uint32]uint64 // replicas (blocks) each datanode holds
	moveOff map[uint32]uint64 // blocks queued or in flight that leave each datanode
}

// repItem is a queued extent: fewer replicas present than wanted.
type repItem struct {
	ino     uint64
	x       wire.Extent
	present int // replicas counted (good or away)
	// from, for a balancing move (balance.go), is the datanode whose
	// replica moves (0: none, the extent lacks replicas).
	from uint32
}

func newReplicator(deadAfter time.Duration, perNode int) *replicator {
	return &replicator{deadAfter: deadAfter, perNode: perNode, started: time.Now(), draining: map[uint32]bool{},
		tasks: map[*copyTask]struct{}{}, busy: map[uint32]int{}, kick: make(chan struct{}, 1), trimFrees: map[*meta.Change][]run{},
		queue: map[uint64][]repItem{}, dirty: map[uint64]bool{}, bad: map[wire.Run]uint32{}, moved: map[uint32]int64{}}
}

// wake makes the replicator scan soon (never blocks).
func (rp *replicator) wake() {
	select {
	case rp.kick <- struct{}{}:
	default:
	}
}

// state classifies a replica on dn (nil: an unknown datanode).
func (rp *replicator) state(dn *dnode, now time.Time) replicaState {
	switch {
	case dn == nil:
		return repGone
	case dn.alive && rp.draining[dn.ID]:
		return repLeaving
	case dn.alive && dn.Enabled:
		return repGood
	case dn.alive:
		// Disabled, not draining: takes no new blocks, keeps its own.
		return repGood
	case now.Sub(rp.lastSeen(dn)) < rp.deadAfter:
		return repAway
	}
	return repGone
}

func (rp *replicator) lastSeen(dn *dnode) time.Time {
	if dn.lastSeen.Before(rp.started) {
		return rp.started
	}
	return dn.lastSeen
}

// replicatorLoop scans every scanInterval, or when woken, until stop.
func (n *Namenode) replicatorLoop() {
	defer n.wg.Done()
	t := time.NewTicker(scanInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		case <-n.repl.kick:
		}
		n.mu.Lock()
		if n.failed() == nil {
			n.replicationTick(time.Now())
		}
		n.mu.Unlock()
	}
}

// replicationTick scans what needs it and starts copies. Called with n.mu
// held.
func (n *Namenode) replicationTick(now time.Time) {
	rp := n.repl
	// Trimmed blocks wait for the readers that began before the trim;
	// without this they would be released only at the next commit.
	n.releaseFrees()
	switch {
	case rp.forceFull || rp.balancing || !slices.Equal(n.nodeSignature(now), rp.nodeSig) || now.Sub(rp.lastFull) >= fullScanInterval:
		n.replicationScan(now, nil)
	case len(rp.dirty) > 0:
		n.replicationScan(now, rp.dirty)
	}
	n.scheduleCopies()
}

// nodeSignature describes every datanode's state as the replicator sees
// it: when it changes, every file is scanned.
func (n *Namenode) nodeSignature(now time.Time) []uint64 {
	var sig []uint64
	for dn := range n.nodes.all() {
		st := uint64(n.repl.state(dn, now))
		if dn.Enabled {
			st |= 8
		}
		sig = append(sig, uint64(dn.ID)<<8|st)
	}
	slices.Sort(sig)
	return sig
}

// note marks the files a commit changed for the next scan. Called with
// n.mu held.
func (rp *replicator) note(c *meta.Change) {
	for ino := range c.Blocks {
		rp.dirty[ino] = true
	}
	for _, a := range c.PutInodes {
		rp.dirty[a.Ino] = true
	}
}

// busyInodes returns the files whose block lists an open transaction
// changes or may extend in place: the replicator leaves them alone (its
// commit would be overwritten by theirs, or miss their extension).
func (n *Namenode) busyInodes() map[uint64]bool {
	busy := map[uint64]bool{}
	for _, tx := range n.txns.all() {
		for ino := range tx.blocks {
			busy[ino] = true
		}
		for _, r := range tx.extended {
			busy[r.ino] = true
		}
	}
	return busy
}

// replicationScan looks at the blocks of the files in only (nil: of
// every file, and counts them for the status): it trims surplus replicas
// and queues the blocks that lack some. Called with n.mu held.
func (n *Namenode) replicationScan(now time.Time, only map[uint64]bool) {
	rp := n.repl
	busy := n.busyInodes()
	inflight := map[uint64][]*copyTask{}
	for t := range rp.tasks {
		inflight[t.ino] = append(inflight[t.ino], t)
	}
	s := repScan{at: now, blocks: map[uint32]uint64{}, moveOff: map[uint32]uint64{}}
	for t := range rp.tasks {
		s.moveOff[t.leaving] += uint64(t.count)
	}
	trimmedAny := false
	matched := map[wire.Run]bool{} // damaged replicas still listed
	var plan *balancePlan
	if only == nil {
		plan = n.planBalance()
	}
	scan := func(ino uint64, in *inode) {
		delete(rp.queue, ino)
		if in == nil || in.attr.Type != wire.TypeFile || len(in.blocks) == 0 {
			return
		}
		if busy[ino] || len(inflight[ino]) > 0 {
			rp.dirty[ino] = true // again once its transaction or copy ended
		}
		var out []wire.Extent // the trimmed list, once something is trimmed
		var freed []run
		xs := n.splitBad(in.blocks, matched)
		for i, x := range xs {
			frozen := busy[ino] || overlaps(inflight[ino], x)
			keep, drop := n.classifyExtent(&s, ino, in, x, frozen, now)
			for _, r := range keep {
				s.blocks[r.Node] += uint64(x.Count) // after the trim: what the datanodes keep
			}
			if plan != nil && !frozen && drop == nil && len(keep) == int(in.attr.Rep) && n.allGood(x, now) {
				plan.item(rp, ino, x)
			}
			if drop == nil && out == nil {
				continue
			}
			if out == nil {
				out = append([]wire.Extent(nil), xs[:i]...)
			}
			for _, r := range drop {
				freed = append(freed, run{node: r.Node, start: r.Start, count: uint64(x.Count)})
			}
			x.Replicas = keep
			out = appendExtent(out, x)
		}
		if freed != nil {
			n.trim(ino, in, out, freed)
			trimmedAny = true
		}
	}
	rp.dirty = map[uint64]bool{} // only is the old one, or nil
	if only == nil {
		clear(rp.queue) // also of files deleted meanwhile
		for ino, in := range n.ns.inodes {
			scan(ino, in)
		}
	} else {
		for ino := range only {
			scan(ino, n.ns.inodes[ino])
		}
	}
	if trimmedAny {
		n.epoch++ // transactions that began before may still read the trimmed replicas
	}
	if only == nil {
		rp.last, rp.lastFull, rp.nodeSig, rp.forceFull = s, now, n.nodeSignature(now), false
		clear(rp.moved)
		for r := range rp.bad {
			if !matched[r] {
				delete(rp.bad, r) // not (or no longer) a listed replica of that version
			}
		}
	}
}

// allGood reports whether every replica of x is good.
func (n *Namenode) allGood(x wire.Extent, now time.Time) bool {
	for _, r := range x.Replicas {
		if n.replicaState(r, x, now) != repGood {
			return false
		}
	}
	return true
}

// splitBad returns xs with every extent that has a replica reported
// damaged cut into single blocks, so each can be judged alone, and notes
// the damaged replicas found in matched.
func (n *Namenode) splitBad(xs []wire.Extent, matched map[wire.Run]bool) []wire.Extent {
	if len(n.repl.bad) == 0 {
		return xs
	}
	var out []wire.Extent
	for i, x := range xs {
		if !n.hasBad(x, matched) {
			if out != nil {
				out = append(out, x)
			}
			continue
		}
		if out == nil {
			out = append([]wire.Extent(nil), xs[:i]...)
		}
		for k := uint64(0); k < uint64(x.Count); k++ {
			out = append(out, splitExtent(x, k, 1)[min(k, 1)])
		}
	}
	if out == nil {
		return xs
	}
	return out
}

// hasBad reports whether a replica of a block of x was reported damaged
// in the version x holds, noting it in matched.
func (n *Namenode) hasBad(x wire.Extent, matched map[wire.Run]bool) bool {
	found := false
	for _, r := range x.Replicas {
		for k := uint64(0); k < uint64(x.Count); k++ {
			b := wire.Run{Node: r.Node, Start: r.Start + k}
			if crc, ok := n.repl.bad[b]; ok && crc == x.CRC[k] {
				matched[b] = true
				found = true
			}
		}
	}
	return found
}

// replicaState is the state of x's replica r: its datanode's, or gone if
// r (a single block) was reported damaged in this version.
func (n *Namenode) replicaState(r wire.Run, x wire.Extent, now time.Time) replicaState {
	if x.Count == 1 && len(n.repl.bad) > 0 {
		if crc, ok := n.repl.bad[r]; ok && crc == x.CRC[0] {
			return repGone
		}
	}
	return n.repl.state(n.nodes.get(r.Node), now)
}

// queued returns the queued extents, most endangered first.
func (rp *replicator) queued() []repItem {
	var out []repItem
	for _, items := range rp.queue {
		out = append(out, items...)
	}
	slices.SortFunc(out, func(a, b repItem) int {
		if c := cmp.Compare(a.present, b.present); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.ino, b.ino), cmp.Compare(a.x.Index, b.x.Index))
	})
	return out
}

// classifyExtent counts x into s and decides its replicas: those to keep
// and, if any, those to trim (nil: none). An extent being changed or
// copied (frozen) is counted but neither trimmed nor queued.
func (n *Namenode) classifyExtent(s *repScan, ino uint64, in *inode, x wire.Extent, frozen bool, now time.Time) (keep, drop []wire.Run) {
	rp := n.repl
	want := int(in.attr.Rep)
	var good, leaving, away int
	for _, r := range x.Replicas {
		switch n.replicaState(r, x, now) {
		case repGood:
			good++
		case repLeaving:
			leaving++
		case repAway:
			away++
		}
	}
	cnt := uint64(x.Count)
	if good < want {
		s.under += cnt
	}
	if good+leaving == 0 {
		s.lost += cnt
		return x.Replicas, nil
	}
	present := good + away
	switch {
	case present < want:
		for _, r := range x.Replicas {
			if st := n.replicaState(r, x, now); st == repLeaving || st == repGone {
				s.moveOff[r.Node] += cnt
			}
		}
		if !frozen {
			rp.queue[ino] = append(rp.queue[ino], repItem{ino: ino, x: x, present: present})
		}
		return x.Replicas, nil
	case good < want:
		s.waiting += cnt
		return x.Replicas, nil
	case frozen || len(x.Replicas) == want:
		return x.Replicas, nil
	}
	// Enough good replicas: keep want of them, those on the datanodes with
	// the most free space, and trim every other.
	var goods []wire.Run
	for _, r := range x.Replicas {
		if n.replicaState(r, x, now) == repGood {
			goods = append(goods, r)
		} else {
			drop = append(drop, r)
		}
	}
	slices.SortStableFunc(goods, func(a, b wire.Run) int {
		bs := uint64(n.cfg.Blocksize) // room: free slots, or free bytes on a sparse volume (space.go)
		return cmp.Compare(n.nodes.get(b.Node).room(bs), n.nodes.get(a.Node).room(bs))
	})
	keepSet := map[wire.Run]bool{}
	for _, r := range goods[:want] {
		keepSet[r] = true
	}
	drop = append(drop, goods[want:]...)
	for _, r := range x.Replicas {
		if keepSet[r] {
			keep = append(keep, r) // in their order in the list
		}
	}
	return keep, drop
}

// overlaps reports whether a copy task of tasks covers a block of x.
func overlaps(tasks []*copyTask, x wire.Extent) bool {
	for _, t := range tasks {
		if t.index < x.Index+uint64(x.Count) && x.Index < t.index+uint64(t.count) {
			return true
		}
	}
	return false
}

// trim replaces ino's block list by xs, which lacks the replicas freed,
// and queues the change; freed is released once it is durable
// (nnStore.internal). Called with n.mu held.
func (n *Namenode) trim(ino uint64, in *inode, xs []wire.Extent, freed []run) {
	in.blocks = xs
	ch := &meta.Change{Blocks: map[uint64][]meta.Extent{ino: storeExtents(xs)}}
	n.fsck.note(ch)
	n.repl.trimFrees[ch] = freed
	for _, r := range freed {
		n.repl.trimmed += r.count
		if r.count == 1 {
			delete(n.repl.bad, wire.Run{Node: r.node, Start: r.start})
		}
	}
	n.deferChange(ch)
}

// takeTrimFrees moves the blocks freed by the internal changes the
// committer takes now (batch appliedSeq+1) to the free queue. Called with
// n.mu held.
func (n *Namenode) takeTrimFrees(changes []*meta.Change) {
	var runs []run
	for _, ch := range changes {
		if r, ok := n.repl.trimFrees[ch]; ok {
			runs = append(runs, r...)
			delete(n.repl.trimFrees, ch)
		}
	}
	if len(runs) > 0 {
		n.frees.add(pendingFree{epoch: n.epoch, needSeq: n.appliedSeq + 1, runs: runs})
	}
}
