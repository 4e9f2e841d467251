package namenode

import (
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
)

// BenchmarkObserverPerCommit is what metrics add to one create+commit:
// the create's latency, the commit's latency, its batch and one fsync
// (compare with the namenode's CPU per create+commit, 'plasma bench
// create', about 150-300 µs).
func BenchmarkObserverPerCommit(b *testing.B) {
	o := newObserver()
	batch := []*commitReq{{tx: &Txn{}}}
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		o.request(wire.OpCreate, time.Since(start))
		o.committed(false, time.Since(start))
		o.batch(batch)
		o.fsync(start)
	}
}
