package smallfiles

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestFullClusterRefusesBeforeItIsFull: small files written one per
// commit to two sparse datanodes of 16 MiB (replication 2) end with a
// clean ENOSPC from the namenode that names both datanodes, when what
// the files hold is close to the capacity but not past it: the volumes'
// data files take no more disk than the capacity and their entries, 'plasma
// df' says the cluster is full, and every file committed before reads back.
// Without the namenode's accounting in bytes the datanodes take files past
// their capacity (their slots are many).
func TestFullClusterRefusesBeforeItIsFull(t *testing.T) {
	const capacity = 16 << 20
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 1 << 20, Size: capacity, Sparse: true})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	sizes := sourceLikeSizes(4000, 2)
	var written []int
	var pages int64
	var full error
	for i, size := range sizes {
		path := fmt.Sprintf("/f%04d", i)
		err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.CreateFile(ctx, path, client.CreateOptions{Rep: 2})
			if err != nil {
				return err
			}
			_, err = f.Write(testkit.SeededBytes(size, uint64(i)))
			return err
		})
		if err != nil {
			full = err
			break
		}
		written = append(written, i)
		pages += pageRounded(size)
	}
	if full == nil {
		t.Fatalf("%d files holding %d bytes in pages fit on datanodes of %d bytes", len(written), pages, capacity)
	}
	if !isNoSpace(full) || !strings.Contains(full.Error(), "space") {
		t.Fatalf("the write that did not fit failed with %v, want ENOSPC (client.ErrNoSpace) saying so", full)
	}
	for _, ident := range testkit.DatanodeIdentities(t, c) {
		if !strings.Contains(full.Error(), ident) {
			t.Errorf("the ENOSPC error does not name datanode %s: %v", ident, full)
		}
	}
	t.Logf("full after %d files, %d bytes in pages per replica, of %d: %v", len(written), pages, capacity, full)
	if pages > capacity || pages < capacity*7/8 {
		t.Errorf("full with %d bytes in pages on each datanode, want between 7/8 of the capacity and the capacity (%d)", pages, capacity)
	}
	for _, p := range c.DNs {
		if got, most := diskBytes(t, p.Dir+"/data"), capacity+volumeEntries(t, p.Dir); got > most {
			t.Errorf("volume %s takes %d bytes of disk, more than its capacity and its entries (%d)", p.Dir, got, most)
		}
	}
	if v := df(t, c); v.Percent < 90 || v.Size != 2*capacity {
		t.Errorf("plasma df on the full cluster: %+v, want size %d and at least 90%% used", v, 2*capacity)
	}
	for _, i := range written {
		if got := testkit.ReadFile(t, cl, fmt.Sprintf("/f%04d", i)); string(got) != string(testkit.SeededBytes(sizes[i], uint64(i))) {
			t.Fatalf("/f%04d does not read back", i)
		}
	}
	testkit.FsckClean(t, cl)
}
