package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestRandomRequests drives the namenode's request handler (not only the
// decoders) with random, well-formed requests from an ordinary user and
// from the superuser: every request is answered (no closed connection, no
// stopped namenode), and afterwards the metadata is consistent.
func TestRandomRequests(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	admin := c.Client(client.Config{})
	defer admin.Close()
	ctx := context.Background()
	c.MustRun("mkdir", "/pub")
	c.MustRun("chmod", "777", "/pub")
	testkit.WriteFile(t, admin, "/pub/seed", testkit.RandomBytes(t, 3*int(c.Opts.Blocksize)), 2)

	names := []string{"a", "b", "c", "d", "dir", "x/y", "seed", "..", ".", "dir/a", "dir/b"}
	randPath := func() string {
		base := []string{"/pub", "/", "/pub/dir", "/nope"}[rng.IntN(4)]
		return strings.TrimSuffix(base, "/") + "/" + names[rng.IntN(len(names))]
	}
	ops := []wire.Op{wire.OpCommit, wire.OpAbort, wire.OpLookup, wire.OpStat, wire.OpCreate, wire.OpReadDir,
		wire.OpSetAttr, wire.OpRename, wire.OpLink, wire.OpUnlink, wire.OpBlocks, wire.OpAllocate, wire.OpSetBlocks,
		wire.OpGlob, wire.OpFsStat, wire.OpPing, wire.OpDropReplicas, wire.OpKeepalive}
	okByOp := map[wire.Op]int{}
	for _, who := range []string{c.IssueCredential("mallory", auth.RoleUser), c.AdminCred} {
		conn := testkit.RawAs(t, c, who)
		var lastAlloc []wire.Extent
		seen := []uint64{1}
		for i := 0; i < 2000; i++ {
			q := &wire.Request{Op: ops[rng.IntN(len(ops))], Txn: uint64(1 + rng.IntN(4)), Path: randPath(), Path2: randPath(),
				Ino: uint64(rng.IntN(40)), Flags: uint32(rng.Uint64()) & (1<<14 - 1), Type: wire.FileType(1 + rng.IntN(3)),
				Mode: uint32(rng.IntN(0o10000)), Size: rng.Int64N(1<<20) - 1000, Rep: uint8(rng.IntN(4)),
				Index: uint64(rng.IntN(300)), Count: uint64(rng.IntN(70)), Mtime: rng.Int64()}
			if rng.IntN(4) > 0 {
				q.Ino = seen[rng.IntN(len(seen))]
			}
			if rng.IntN(2) == 0 {
				q.Flags &= wire.FlagSize | wire.FlagMode | wire.FlagMtime | wire.FlagPlus | wire.FlagBlocks
			}
			if rng.IntN(3) > 0 {
				q.Flags |= wire.FlagBegin
			}
			if q.Op == wire.OpSetBlocks {
				if len(lastAlloc) > 0 && rng.IntN(2) == 0 {
					q.Extents = lastAlloc
					for j := range q.Extents {
						q.Extents[j].CRC = make([]uint32, q.Extents[j].Count)
					}
				} else {
					q.Extents = []wire.Extent{{Index: uint64(rng.IntN(10)), Count: uint32(1 + rng.IntN(3)), CRC: []uint32{1, 2, 3}[:1+rng.IntN(3)],
						Replicas: []wire.Run{{Node: uint32(1 + rng.IntN(3)), Start: uint64(rng.IntN(100))}}}}
				}
			}
			if q.Op == wire.OpDropReplicas {
				q.Pref = []string{fmt.Sprint(rng.IntN(3))}
			}
			r, err := conn.Call(ctx, q)
			if err != nil {
				t.Fatalf("request %d (%s %+v): connection lost: %v", i, q.Op, q, err)
			}
			if r.Code == wire.OK {
				okByOp[q.Op]++
			}
			if r.Attr != nil && r.Attr.Ino != 0 && len(seen) < 64 {
				seen = append(seen, r.Attr.Ino)
			}
			if q.Op == wire.OpAllocate && r.Code == wire.OK {
				lastAlloc = r.Extents
			}
		}
		conn.Close()
	}
	if !c.NN.Running() {
		t.Fatal("namenode stopped")
	}
	t.Logf("requests that succeeded, by operation: %v", okByOp)
	rep, err := admin.Fsck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("fsck after random requests (seed %d):\n%s", seed, strings.Join(rep.Problems, "\n"))
	}
}
