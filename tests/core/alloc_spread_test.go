package core

import (
	"context"
	"fmt"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestSingleReplicaFilesSpread (issue 19 item 11): small single-replica
// files spread over the datanodes by free space instead of all going to
// the first one, and each file's blocks stay together, contiguous on one
// datanode.
//
// Failed before the fix: all 160 blocks on datanode 1.
func TestSingleReplicaFilesSpread(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	bs := int(c.Opts.Blocksize)
	const files, blocksPerFile = 40, 4
	for i := 0; i < files; i++ {
		testkit.WriteFile(t, cl, fmt.Sprintf("/f%02d", i), testkit.SeededBytes((blocksPerFile-1)*bs+100, uint64(i)), 1)
	}
	perNode := map[string]int{}
	testkit.MustOK(t, "block lists", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		clear(perNode)
		for i := 0; i < files; i++ {
			p := fmt.Sprintf("/f%02d", i)
			fi, err := tx.Lookup(ctx, p)
			if err != nil {
				return err
			}
			xs, err := tx.Blocks(ctx, fi.Ino)
			if err != nil {
				return err
			}
			n, node, next := 0, "", uint64(0)
			for k, x := range xs {
				if len(x.Replicas) != 1 {
					t.Fatalf("%s: extent %+v has %d replicas, want 1", p, x, len(x.Replicas))
				}
				r := x.Replicas[0]
				if k > 0 && (r.Datanode != node || r.Start != next) {
					t.Errorf("%s: blocks not contiguous on one datanode: %+v", p, xs)
				}
				node, next = r.Datanode, r.Start+uint64(x.Count)
				n += x.Count
				perNode[r.Datanode] += x.Count
			}
			if n != blocksPerFile {
				t.Fatalf("%s has %d blocks, want %d", p, n, blocksPerFile)
			}
		}
		return nil
	}))
	total := files * blocksPerFile
	if len(perNode) != 2 {
		t.Fatalf("blocks per datanode: %v; want both datanodes used", perNode)
	}
	for dn, n := range perNode {
		if n < total/4 {
			t.Errorf("datanode %s holds %d of %d blocks, less than a quarter: %v", dn, n, total, perNode)
		}
	}
}
