package smallfiles

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestLargeFileCountedOnce: a file of three quarters of the sparse
// volumes, written in one transaction (replication 2) in flushes of a
// block, fits: while it is written its blocks count once, as the
// namenode's allocations, not again as bytes the datanodes report before
// the commit's sync (after the first half the test waits for two
// heartbeats of each datanode, which would report it). After the commit
// the datanodes report the file's bytes.
func TestLargeFileCountedOnce(t *testing.T) {
	const capacity = 64 << 20
	const bs = 1 << 20
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: bs, Size: capacity, Sparse: true})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	data := testkit.SeededBytes(capacity*3/4, 9)
	err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.CreateFile(ctx, "/large", client.CreateOptions{Rep: 2})
		if err != nil {
			return err
		}
		for off := 0; off < len(data); off += bs {
			if _, err := f.Write(data[off : off+bs]); err != nil {
				return err
			}
			if err := f.Flush(ctx); err != nil {
				return err
			}
			if off == len(data)/2 {
				waitHeartbeats(t, cl, 2)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a file of %d bytes on volumes of %d: %v", len(data), capacity, err)
	}
	if got := testkit.ReadFile(t, cl, "/large"); !bytes.Equal(got, data) {
		t.Fatalf("/large reads back as %d bytes (%d differ)", len(got), testkit.CountDiff(got, data))
	}
	for _, used := range settledUse(t, cl) {
		if used != uint64(len(data)) {
			t.Errorf("a datanode reports %d bytes used, want the file's %d", used, len(data))
		}
	}
	testkit.FsckClean(t, cl)
}

// waitHeartbeats waits until the namenode has had n more heartbeats from
// every datanode.
func waitHeartbeats(t *testing.T, cl *client.Client, n int) {
	t.Helper()
	seen := map[uint32]time.Time{}
	count := map[uint32]int{}
	testkit.AwaitCond(t, time.Minute, "heartbeats of every datanode", func() bool {
		s, err := cl.ReplicationStatus(context.Background())
		testkit.MustOK(t, "replication status", err)
		done := true
		for _, d := range s.Nodes {
			if last, ok := seen[d.ID]; ok && d.LastSeen.After(last) {
				count[d.ID]++
			}
			seen[d.ID] = d.LastSeen
			done = done && count[d.ID] >= n
		}
		return done
	})
}
