package tests

import (
	"hash/crc32"

	"github.com/plasmafs/plasma/client"
)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// diskRuns merges a block list's extents into the runs they make on the
// datanodes: extents end where allocations end (each carries its
// allocation's generation), runs where the blocks stop being contiguous.
func diskRuns(xs []client.Extent) []client.Extent {
	var out []client.Extent
	for _, x := range xs {
		if n := len(out); n > 0 {
			l := &out[n-1]
			same := l.Index+uint64(l.Count) == x.Index && len(l.Replicas) == len(x.Replicas)
			for i := 0; same && i < len(x.Replicas); i++ {
				same = l.Replicas[i].Datanode == x.Replicas[i].Datanode && l.Replicas[i].Start+uint64(l.Count) == x.Replicas[i].Start
			}
			if same {
				l.Count += x.Count
				continue
			}
		}
		x.Replicas = append([]client.Replica(nil), x.Replicas...)
		out = append(out, x)
	}
	return out
}
