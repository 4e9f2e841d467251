package powercut

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestPowerCutAsyncThenSync: async commits acknowledged before a completed
// Sync survive a power cut; of those after it, what survives is a prefix of
// the commit order. Fails if Sync does not make the store durable.
func TestPowerCutAsyncThenSync(t *testing.T) {
	// The namenode's own window is made long, so only Sync makes things
	// durable here.
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: []string{"-sync-interval", "1h", "-sync-commits", "1000000"}})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	const synced, after = 100, 100
	for i := 0; i < synced+after; i++ {
		if _, err := clientx.At(clientx.Auto(cl, clientx.Async)).MkdirAt(ctx, 1, fmt.Sprintf("a%03d", i), 0); err != nil {
			t.Fatal(err)
		}
		if i == synced-1 {
			if err := cl.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl.Close()
	c.PowerCut()
	cl = c.Client(client.Config{})
	defer cl.Close()
	present := 0
	gap := false
	for i := 0; i < synced+after; i++ {
		_, err := cl.Lookup(ctx, fmt.Sprintf("/a%03d", i))
		switch {
		case err == nil && gap:
			t.Fatalf("a%03d survived but an earlier commit did not: not a prefix of the commit order", i)
		case err == nil:
			present++
		case errors.Is(err, client.ErrNotFound):
			gap = true
		default:
			t.Fatal(err)
		}
	}
	if present < synced {
		t.Fatalf("%d directories after the power cut; the %d committed before the Sync must all be there", present, synced)
	}
	t.Logf("%d of %d async commits survived (%d were synced)", present, synced+after, synced)
}

// TestPowerCutRelaxedNeverCorrupts: blocks freed by an acknowledged but not
// yet durable commit are not reused before that commit is durable, so a
// power cut that loses the deletion brings the deleted file back intact,
// never with another file's data in its blocks.
func TestPowerCutRelaxedNeverCorrupts(t *testing.T) {
	// One small datanode (48 blocks), so a new file can only take the
	// deleted file's blocks.
	c := clustertest.StartPowerCut(t, clustertest.Options{Datanodes: 1, Size: 48 * 64 << 10, Relaxed: true,
		NamenodeArgs: []string{"-sync-interval", "1h", "-sync-commits", "1000000", "-user-alloc-limit", "1000"}})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	bs := int(c.Opts.Blocksize)
	victim := testkit.RandomBytes(t, 40*bs)
	testkit.WriteFile(t, cl, "/victim", victim, 1)
	if err := cl.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// Delete it (acknowledged, not durable), then write another file that
	// would take its blocks (its data is fsynced on the datanodes).
	if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, "/victim") }); err != nil {
		t.Fatal(err)
	}
	_, err := cl.CopyIn(ctx, bytes.NewReader(bytes.Repeat([]byte{0xAB}, 40*bs)), "/newcomer", client.CopyOptions{Rep: 1})
	if err != nil && !errors.Is(err, client.ErrNoSpace) {
		t.Fatal(err)
	}
	t.Logf("writing a file into the deleted file's space before its deletion is durable: %v", err)
	cl.Close()
	c.PowerCut()
	cl = c.Client(client.Config{})
	defer cl.Close()
	if _, err := cl.Lookup(ctx, "/victim"); err != nil {
		// With the namenode's window this long, it cannot have become durable.
		t.Fatalf("the deletion survived the power cut (%v): the test needs it lost", err)
	}
	if got := testkit.ReadFile(t, cl, "/victim"); !bytes.Equal(got, victim) {
		t.Fatal("the deleted file came back with other data in its blocks")
	}
	rep, err := cl.Fsck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("fsck: %v", rep.Problems)
	}
}
