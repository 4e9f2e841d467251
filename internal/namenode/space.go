package namenode

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
)

// Space in bytes (sparse datanode volumes, datanode/sparse.go).
//
// A sparse volume has many more slots than its capacity holds whole
// blocks, so its block map says where blocks are but not whether they
// fit: a datanode's room is the smaller of its free slots and its free
// bytes, in whole blocks. Its bytes in use are what it reported with its
// last heartbeat (the pages its blocks held at its last sync: a block
// written is counted once the writer's sync before its commit is done),
// plus what was allocated on it that it may not have counted yet:
//
//   - reserved: a whole block for each block allocated to an open
//     transaction or copy (the namenode does not know how much of it the
//     writer will fill);
//   - settling: what the transactions that ended since the last two
//     heartbeats committed there, counted from the files' sizes. A
//     heartbeat reports what was written before it was sent, and a
//     datanode sends its next heartbeat only after the answer to the last,
//     so the second heartbeat after a commit counts its blocks.
//
// Freed slots are not reused at once: they go to the datanode in the
// answer to a heartbeat (a batch with a number), which punches out their
// pages and acknowledges the batch with its next heartbeat; only then are
// they free in the block map. So a slot is never written by a new owner
// before the release of its old content, whatever the order of messages,
// and with or without tickets. A batch not acknowledged is sent again
// (also after the datanode registers again). Freed slots the namenode had
// not released when it stopped are free at its next start (the block maps
// are rebuilt from the block lists) with their pages still on the
// datanode: a write to the slot releases what its block does not cover
// (BlockStore.Write), until then the datanode counts them as used.

// maxReleaseBatch bounds the runs of one heartbeat answer, and
// maxReleaseBlocks their blocks: the datanode releases them before its
// next heartbeat, which must not be late.
const (
	maxReleaseBatch  = 1024
	maxReleaseBlocks = 4096
)

// nodeSpace is a datanode's byte accounting and its freed slots on their
// way back. Guarded by Namenode.mu, like the dnode it is part of.
type nodeSpace struct {
	reserved uint64 // bytes held by open allocations
	settling [2]uint64
	release  []run  // freed slots not yet sent (taken in the block map)
	sent     []run  // the batch sent, not yet acknowledged
	sentSeq  uint64 // its number (0: none sent yet)
	// pending marks the slots in release and sent: a slot freed twice is
	// released once (released again after its reuse, it would lose its
	// new owner's block).
	pending *blockMap
	// kept marks slots the datanode keeps pages in (keptslots.go).
	kept *blockMap
}

// sparse reports whether the datanode's volume is sparse (known from its
// registration since the namenode started).
func (d *dnode) sparse() bool { return d.info.Capacity > 0 }

// seen reports whether the datanode registered since the namenode started.
func (d *dnode) seen() bool { return d.info.Identity != "" }

// capacityBytes is what the datanode may hold: a sparse volume's
// capacity, a fixed one's blocks; 0 for a datanode not seen since the
// namenode started (a sparse volume's slots say nothing of its bytes).
func (d *dnode) capacityBytes(bs uint64) uint64 {
	switch {
	case d.sparse():
		return d.info.Capacity
	case d.seen():
		return d.Blocks * bs
	}
	return 0
}

// capacityBlocks is the datanode's capacity in whole blocks: a fixed
// volume's slots, a sparse one's bytes (its slots are many more).
func (d *dnode) capacityBlocks(bs uint64) uint64 {
	if d.sparse() && bs > 0 {
		return d.info.Capacity / bs
	}
	return d.Blocks
}

// usedBytes is what the datanode's blocks hold or may hold by now.
func (d *dnode) usedBytes(bs uint64) uint64 {
	if !d.sparse() {
		return d.used.nused * bs
	}
	return d.info.UsedBytes + d.space.reserved + d.space.settling[0] + d.space.settling[1]
}

// room is how many more blocks may be allocated on the datanode.
func (d *dnode) room(bs uint64) uint64 {
	free := d.used.free()
	if !d.sparse() || bs == 0 {
		return free
	}
	c, u := d.capacityBytes(bs), d.usedBytes(bs)
	if u >= c {
		return 0
	}
	return min(free, (c-u)/bs)
}

// alloc takes up to want blocks (contiguous, from hint if free; see
// blockMap.alloc), as many as fit: need(k) is the bytes k of them will
// hold. The caller reserves those it keeps (nodeSpace.reserved).
func (d *dnode) alloc(want, hint uint64, need func(k uint64) uint64) (start, n uint64) {
	if bs := uint64(d.info.Blocksize); d.sparse() && bs > 0 {
		c, u := d.capacityBytes(bs), d.usedBytes(bs)
		free := c - min(c, u)
		switch {
		case need(want) <= free:
		case need(1) <= free:
			want = max(1, min(want, free/bs))
		default:
			return 0, 0
		}
		// Kept slots first for whole blocks, and for any once the
		// bytes free but kept are all that is left (keptslots.go).
		if k := d.space.kept; k != nil && k.nused > 0 && (need(1) >= bs || need(want) > free-min(free, d.keptFreeBytes(bs))) {
			if start, n := d.allocKept(want, hint); n > 0 {
				return start, n
			}
		}
	}
	return d.used.alloc(want, hint)
}

// unreserve ends the reservation of count blocks of an allocation whose
// owner ended, having left settled bytes on the datanode (see nodeSpace).
func (d *dnode) unreserve(count, bs, settled uint64) { d.unreserveBytes(count*bs, settled) }

// unreserveBytes ends a reservation of reserved bytes, as unreserve.
func (d *dnode) unreserveBytes(reserved, settled uint64) {
	if !d.sparse() {
		return
	}
	d.space.reserved -= min(d.space.reserved, reserved)
	d.space.settling[0] += settled
}

// freeSlots returns freed blocks (written, maybe) to the datanode: a fixed
// volume's at once; a sparse volume's once the datanode has released
// their pages.
func (d *dnode) freeSlots(start, count uint64) {
	if count == 0 {
		return
	}
	if !d.sparse() {
		d.used.clear(start, count)
		return
	}
	if p := d.space.pending; p == nil || p.size != d.used.size {
		old := p
		d.space.pending = newBlockMap(d.used.size)
		if old != nil {
			copy(d.space.pending.used, old.used)
		}
	}
	p := d.space.pending
	for b := start; b < start+count && b < p.size; {
		if p.isUsed(b) || !d.used.isUsed(b) {
			b++ // being released already, or free
			continue
		}
		n := uint64(1)
		for b+n < start+count && b+n < p.size && !p.isUsed(b+n) && d.used.isUsed(b+n) {
			n++
		}
		p.set(b, n)
		d.space.release = append(d.space.release, run{node: d.ID, start: b, count: n})
		b += n
	}
}

// heartbeat takes a datanode's report of its bytes and its acknowledgement
// of batch ack with the slots of it that kept their pages, and returns the
// batch of freed slots to release now (as extents of one replica, Index
// the batch number).
func (d *dnode) heartbeat(ni *wire.NodeInfo, ack uint64, kept []wire.Extent) []wire.Extent {
	sp := &d.space
	if d.sparse() && ni.Capacity > 0 {
		d.info.Capacity, d.info.UsedBytes = ni.Capacity, ni.UsedBytes
		sp.settling[1], sp.settling[0] = sp.settling[0], 0
	}
	if sp.sent != nil && ack == sp.sentSeq {
		for _, r := range sp.sent {
			d.used.clear(r.start, r.count)
			sp.pending.clear(r.start, r.count)
			if sp.kept != nil {
				sp.kept.clear(r.start, r.count)
			}
		}
		sp.sent = nil
		d.noteKept(kept)
	}
	if sp.sent == nil && len(sp.release) > 0 {
		blocks := uint64(0)
		for len(sp.release) > 0 && len(sp.sent) < maxReleaseBatch && blocks < maxReleaseBlocks {
			r := sp.release[0]
			if k := maxReleaseBlocks - blocks; r.count > k {
				sp.release[0].start += k
				sp.release[0].count -= k
				r.count = k
			} else {
				sp.release = sp.release[1:]
			}
			sp.sent = append(sp.sent, r)
			blocks += r.count
		}
		if sp.sentSeq == 0 {
			// Numbers from an earlier namenode run must not match.
			sp.sentSeq = uint64(time.Now().UnixNano())
		}
		sp.sentSeq++
	}
	if sp.sent == nil {
		return nil
	}
	xs := make([]wire.Extent, len(sp.sent))
	for i, r := range sp.sent {
		xs[i] = wire.Extent{Index: sp.sentSeq, Count: uint32(r.count), Replicas: []wire.Run{{Node: d.ID, Start: r.start}}}
	}
	return xs
}

// readmitted notes a new registration of the datanode: a batch it may not
// have released is sent again.
func (d *dnode) readmitted() {
	if d.space.sent != nil {
		d.space.release = append(d.space.sent, d.space.release...)
		d.space.sent = nil
	}
}

// committedBytes is what blocks index..index+count-1 of a file of size
// bytes hold on a datanode: their data up to the end of the file, in whole
// pages.
func committedBytes(size int64, index, count, bs uint64) uint64 {
	if size <= 0 || count == 0 {
		return 0
	}
	begin := index * bs
	end := min(uint64(size), (index+count)*bs)
	if end <= begin {
		return 0
	}
	full := (end - begin) / bs
	rest := (end - begin) % bs
	return full*bs + (rest+pageSize-1)/pageSize*pageSize
}

const pageSize = 4096

// trimReservations sets the reservations of tx's allocations for file
// ino, whose blocks it attached, to what they hold at the file's size
// (the size announced at allocation was a hint):
// a block once written is not written again in the transaction (a later
// change allocates another), so a transaction writing many small files
// holds their pages, not whole blocks.
func (n *Namenode) trimReservations(tx *Txn, ino uint64, size int64) {
	bs := uint64(n.cfg.Blocksize)
	for node, runs := range tx.allocated {
		dn := n.nodes.get(node)
		if dn == nil {
			continue
		}
		for i := range runs {
			r := &runs[i]
			if r.ino != ino || r.reserved == 0 {
				continue
			}
			b := max(committedBytes(size, r.index, r.count, bs), r.count*pageSize)
			dn.space.reserved += b
			dn.space.reserved -= min(dn.space.reserved, r.reserved)
			r.reserved = b
		}
	}
}

// settleTxn ends the reservations of tx's allocations: those of a
// committed transaction settle as the bytes their files hold now.
func (n *Namenode) settleTxn(tx *Txn, committed bool) {
	bs := uint64(n.cfg.Blocksize)
	for node, runs := range tx.allocated {
		dn := n.nodes.get(node)
		if dn == nil {
			continue
		}
		for _, r := range runs {
			var settled uint64
			if in := n.ns.inodes[r.ino]; committed && in != nil {
				settled = min(r.reserved, committedBytes(in.attr.Size, r.index, r.count, bs))
			}
			dn.unreserveBytes(r.reserved, settled)
		}
	}
}

// nodeBytes is the total capacity and use of the datanodes, in bytes.
func (n *Namenode) nodeBytes() (capacity, used uint64) {
	bs := uint64(n.cfg.Blocksize)
	for dn := range n.nodes.all() {
		c := dn.capacityBytes(bs)
		capacity += c
		used += min(c, dn.usedBytes(bs))
	}
	return capacity, used
}

// roomReport names the live datanodes with their free and total bytes,
// for an out-of-space error.
func (n *Namenode) roomReport() string {
	bs := uint64(n.cfg.Blocksize)
	live := n.nodes.live()
	sort.Slice(live, func(i, j int) bool { return live[i].ID < live[j].ID })
	var parts []string
	for _, dn := range live {
		c := dn.capacityBytes(bs)
		parts = append(parts, fmt.Sprintf("%s at %s: %s free of %s", dn.Identity, dn.info.Addr, sizeText(c-min(c, dn.usedBytes(bs))), sizeText(c)))
	}
	if len(parts) == 0 {
		return "no live datanodes"
	}
	return strings.Join(parts, "; ")
}

// sizeText is b bytes in KiB, MiB or GiB.
func sizeText(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", b>>10)
}
