package namenode

import (
	"sort"

	"github.com/plasmafs/plasma/internal/wire"
)

// mergeBlocks replaces the blocks of old that add covers and returns the new
// list and the replaced blocks. Appending past the end, the common case of a
// sequential write, does not touch old.
func mergeBlocks(old, add []wire.Extent) ([]wire.Extent, []run) {
	add = append([]wire.Extent(nil), add...)
	sort.Slice(add, func(i, j int) bool { return add[i].Index < add[j].Index })
	end := uint64(0)
	if len(old) > 0 {
		l := old[len(old)-1]
		end = l.Index + uint64(l.Count)
	}
	if len(add) == 0 {
		return old, nil
	}
	if add[0].Index >= end {
		out := make([]wire.Extent, len(old), len(old)+len(add))
		copy(out, old)
		for _, x := range add {
			out = appendExtent(out, x)
		}
		return out, nil
	}
	// General case: per block.
	type blk struct {
		reps []wire.Run // Start is the block itself here
		crc  uint32
		gen  uint64
	}
	m := map[uint64]blk{}
	put := func(x wire.Extent, k uint64) blk {
		b := blk{crc: x.CRC[k], gen: x.Gen, reps: make([]wire.Run, len(x.Replicas))}
		for i, r := range x.Replicas {
			b.reps[i] = wire.Run{Node: r.Node, Start: r.Start + k}
		}
		return b
	}
	for _, x := range old {
		for k := uint64(0); k < uint64(x.Count); k++ {
			m[x.Index+k] = put(x, k)
		}
	}
	var freed []run
	for _, x := range add {
		for k := uint64(0); k < uint64(x.Count); k++ {
			if prev, ok := m[x.Index+k]; ok {
				for _, r := range prev.reps {
					freed = append(freed, run{node: r.Node, start: r.Start, count: 1})
				}
			}
			m[x.Index+k] = put(x, k)
		}
	}
	idx := make([]uint64, 0, len(m))
	for i := range m {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(i, j int) bool { return idx[i] < idx[j] })
	var out []wire.Extent
	for _, i := range idx {
		b := m[i]
		out = appendExtent(out, wire.Extent{Index: i, Count: 1, Replicas: b.reps, CRC: []uint32{b.crc}, Gen: b.gen})
	}
	return out, freed
}

// appendExtent appends x, merging it into the last extent when both are
// contiguous in the file and on every replica.
func appendExtent(xs []wire.Extent, x wire.Extent) []wire.Extent {
	if len(xs) > 0 {
		l := &xs[len(xs)-1]
		if l.Index+uint64(l.Count) == x.Index && len(l.Replicas) == len(x.Replicas) && l.Gen == x.Gen {
			ok := true
			for i, r := range l.Replicas {
				if x.Replicas[i].Node != r.Node || x.Replicas[i].Start != r.Start+uint64(l.Count) {
					ok = false
					break
				}
			}
			if ok {
				crc := make([]uint32, 0, len(l.CRC)+len(x.CRC))
				crc = append(append(crc, l.CRC...), x.CRC...)
				l.CRC = crc
				l.Count += x.Count
				return xs
			}
		}
	}
	return append(xs, x)
}
