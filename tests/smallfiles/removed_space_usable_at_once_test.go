package smallfiles

import (
	"bytes"
	"context"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestRemovedSpaceUsableAtOnce: on two sparse datanodes of 16 MiB
// (replication 2), a 12 MiB file is removed and another 12 MiB file is
// written at once, five times over, without waiting for the datanodes to
// release the freed blocks (they do so in answers to their heartbeats).
// Each write must succeed and read back: the space being freed is a wait,
// not a full cluster. Without the namenode telling the two apart (or the
// client waiting it out), the write fails "out of space".
func TestRemovedSpaceUsableAtOnce(t *testing.T) {
	const capacity = 16 << 20
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 1 << 20, Size: capacity, Sparse: true,
		DatanodeArgs: []string{"-heartbeat", "1s"}})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	write := func(path string, seed uint64) []byte {
		data := testkit.SeededBytes(12<<20, seed)
		testkit.MustOK(t, "write "+path, cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.CreateFile(ctx, path, client.CreateOptions{Rep: 2})
			if err != nil {
				return err
			}
			_, err = f.Write(data)
			return err
		}))
		return data
	}
	prev := "/f0"
	want := write(prev, 0)
	for i := 1; i <= 5; i++ {
		testkit.MustOK(t, "remove "+prev, cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, prev) }))
		next := "/f" + string(rune('0'+i))
		want = write(next, uint64(i))
		prev = next
	}
	if got := testkit.ReadWhole(t, cl, prev); !bytes.Equal(got, want) {
		t.Fatalf("%s does not read back as written", prev)
	}
	testkit.FsckClean(t, cl)
}
