package namenode

// A copy's source that finds its own replica damaged: the datanode
// refuses to send a block that fails its checksum, so the copy task (a
// run of blocks) fails and nothing of it is attached. Left at that, the
// replicator would pick the same run again, from the same damaged source
// as often as not, and a block damaged on every source of some run (each
// of its replicas damaged in another block) would never be copied. So the
// namenode treats the refusal as a reader's report (readerreport.go): it
// has the datanode verify the block and, if it fails its committed
// checksum, condemns the replica; the replicator then copies that block
// alone from a good replica and the rest of the run from wherever it is
// good.

import (
	"slices"

	"github.com/plasmafs/plasma/internal/wire"
)

// suspectCopySource starts the verification of the source block t's copy
// found damaged, if any. Called with n.mu held.
func (n *Namenode) suspectCopySource(t *copyTask) {
	if !t.srcSuspect || t.srcDamaged >= uint64(t.count) {
		return
	}
	rp := n.repl
	r := t.src
	r.Start += t.srcDamaged
	crc := t.crc[t.srcDamaged]
	if _, known := rp.bad[r]; known || rp.verifying[r] || len(rp.verifying) >= maxVerifying {
		return
	}
	dn := n.nodes.get(r.Node)
	if dn == nil || !dn.alive {
		return
	}
	// Only if the block is still that version on that replica.
	in := n.ns.inodes[t.ino]
	if in == nil {
		return
	}
	idx := t.index + t.srcDamaged
	i := slices.IndexFunc(in.blocks, func(x wire.Extent) bool { return x.Index <= idx && idx < x.Index+uint64(x.Count) })
	if i < 0 {
		return
	}
	x := in.blocks[i]
	k := idx - x.Index
	if x.CRC[k] != crc || x.Gen != t.gen || !slices.Contains(x.Replicas, wire.Run{Node: r.Node, Start: r.Start - k}) {
		return
	}
	n.log.Info("copy source reports a damaged replica, verifying it", "node", r.Node, "block", r.Start, "ino", t.ino, "index", idx)
	n.startVerify(r, crc, x.Gen, dn.info.Addr)
}
