package smallfiles

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestFreedBlocksGiveSpaceBack: on two sparse datanodes of 16 MiB
// (replication 2), four rounds each write about 10 MiB of small files,
// read them back and delete them: 40 MiB in all, more than twice the
// capacity. After each deletion the datanodes release the freed blocks'
// pages: 'plasma df' drops back to nothing used and the volumes' data files
// back to their entries on disk. Without the release (the datanodes keep
// the pages of freed blocks, and count them) the second round runs out of
// space.
func TestFreedBlocksGiveSpaceBack(t *testing.T) {
	const capacity = 16 << 20
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 1 << 20, Size: capacity, Sparse: true})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	for round := range 4 {
		tr := newTree(fmt.Sprintf("/r%d", round), 2000, 100, uint64(10+round))
		pages := tr.upTo(10 << 20)
		if n, err := tr.write(ctx, cl, 2, 2, 10); err != nil {
			t.Fatalf("round %d (%d bytes in pages; %d in earlier rounds, deleted): after %d files: %v", round, pages, int64(round)*pages, n, err)
		}
		tr.check(t, ctx, cl, 2)
		for _, d := range tr.dirs() {
			testkit.MustOK(t, "delete "+d, cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
				ents, err := tx.ReadDir(ctx, d)
				if err != nil {
					return err
				}
				for _, e := range ents {
					if err := tx.Unlink(ctx, filepath.Join(d, e.Name)); err != nil {
						return err
					}
				}
				return tx.Rmdir(ctx, d)
			}))
		}
		waitReleased(t, c, round)
	}
	testkit.FsckClean(t, cl)
}

// waitReleased waits until 'plasma df' shows nothing used and every
// volume's data file holds no more than its entries on disk.
func waitReleased(t *testing.T, c *clustertest.Procs, round int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		v := df(t, c)
		most := int64(0)
		var disk []int64
		for _, p := range c.DNs {
			d := diskBytes(t, p.Dir+"/data")
			disk = append(disk, d)
			most = max(most, d-volumeEntries(t, p.Dir))
		}
		if v.Used == 0 && most <= 64<<10 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("round %d: 60s after deleting every file, df says %+v and the volumes take %v bytes of disk (entries: %d)", round, v, disk, volumeEntries(t, c.DNs[0].Dir))
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, not timing
	}
}
