package datanode

import (
	"github.com/plasmafs/plasma/internal/wire"
)

// releaseFreed empties the slots of a heartbeat answer's batch of freed
// runs (one replica each; Index carries the batch's number) and makes that
// durable. It returns the batch's number, to acknowledge with the next
// heartbeat (the namenode reuses the slots only then), or 0 if there was
// no batch or releasing failed (the namenode sends it again); and the runs
// of the batch whose pages were kept (keep.go), to send with the
// acknowledgement.
func (s *Server) releaseFreed(xs []wire.Extent) (uint64, []wire.Extent) {
	if len(xs) == 0 {
		return 0, nil
	}
	for _, x := range xs {
		for _, r := range x.Replicas {
			if err := s.store.Release(r.Start, uint64(x.Count)); err != nil {
				s.log.Error("release freed blocks", "start", r.Start, "count", x.Count, "err", err)
				return 0, nil
			}
		}
	}
	if err := s.store.Sync(); err != nil {
		s.log.Error("release freed blocks", "err", err)
		return 0, nil
	}
	return xs[0].Index, s.store.keptRuns(xs)
}

// heartbeatNode is what a heartbeat says of the volume: its identity and,
// for a sparse volume, its capacity and the bytes its blocks hold.
func (s *Server) heartbeatNode(identity string) *wire.NodeInfo {
	ni := &wire.NodeInfo{Identity: identity}
	capacity, used := s.store.Space()
	ni.Capacity, ni.UsedBytes = uint64(capacity), uint64(used)
	return ni
}
