package namenode

import (
	"errors"
	"testing"

	"github.com/plasmafs/plasma/internal/wire"
)

// TestAllocateWithoutLiveDatanodesIsUnavailable: with datanodes known
// but none registered yet (a namenode just restarted), an allocation is
// refused as unavailable, which clients and mounts wait out, not as out
// of space, which they report (ENOSPC) at once.
func TestAllocateWithoutLiveDatanodesIsUnavailable(t *testing.T) {
	n := newTwoNodeNamenode(t, 0)
	n.mu.Lock()
	defer n.mu.Unlock()
	tx, err := n.getTxn(&conn{}, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, alive := range []int{0, 1} {
		_, err = n.allocateOp(tx, nil, &wire.Request{Ino: 2, Index: 0, Count: 2, Size: 100})
		var oe *opError
		if !errors.As(err, &oe) || oe.code != wire.ErrCodeUnavailable {
			t.Errorf("allocate of replication 2 with %d live datanodes: %v, want unavailable", alive, err)
		}
		for dn := range n.nodes.all() {
			dn.alive = true // the first one registers
			break
		}
	}
}
