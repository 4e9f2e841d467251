package core

import (
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestPutGetRoundTrip copies files of edge-case sizes in and out with the
// CLI, with replication 1 and 2, and compares them byte for byte.
func TestPutGetRoundTrip(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 64 << 10, Size: 1 << 30})
	bs := int(c.Opts.Blocksize)
	sizes := []int{0, 1, bs - 1, bs, bs + 1, 3*bs + 7}
	if !testing.Short() {
		sizes = append(sizes, 300<<20)
	}
	local := t.TempDir()
	for _, rep := range []int{1, 2} {
		for _, size := range sizes {
			name := fmt.Sprintf("f-%d-rep%d", size, rep)
			src := filepath.Join(local, name)
			data := testkit.RandomBytes(t, size)
			if err := os.WriteFile(src, data, 0o644); err != nil {
				t.Fatal(err)
			}
			out := c.MustRun("put", "-rep", fmt.Sprint(rep), src, "/"+name)
			if !strings.Contains(out, "Copied: "+src+" -> /"+name) {
				t.Errorf("put output %q", out)
			}
			dst := filepath.Join(local, name+".back")
			c.MustRun("get", "/"+name, dst)
			back, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, data) {
				t.Fatalf("%s: get returned different bytes (len %d vs %d)", name, len(back), len(data))
			}
			if size <= 1<<20 {
				catOut, code := c.Run(nil, "cat", "/"+name)
				if code != 0 || catOut != string(data) {
					t.Fatalf("%s: cat differs (exit %d)", name, code)
				}
			}
			blocks := c.MustRun("blocks", "/"+name)
			if !strings.Contains(blocks, fmt.Sprintf("requested replication: %d", rep)) ||
				(size > 0 && !strings.Contains(blocks, fmt.Sprintf("actual replication:    %d", rep))) {
				t.Errorf("%s blocks:\n%s", name, blocks)
			}
		}
	}
	if out := c.MustRun("fsck"); !strings.Contains(out, "0 problems") {
		t.Fatalf("fsck: %s", out)
	}
}

// TestBlockRunsAlternate checks the allocation pattern of seed 000: a file
// with one replica alternates runs of 128 blocks between the datanodes.
func TestBlockRunsAlternate(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 64 << 10, Size: 256 << 20})
	data := testkit.RandomBytes(t, 600*64<<10)
	if out, code := c.Run(data, "put", "-rep", "1", "-stdin", "/big"); code != 0 {
		t.Fatal(out)
	}
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	fi, err := tx.Lookup(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	xs, err := tx.Blocks(ctx, fi.Ino)
	if err != nil {
		t.Fatal(err)
	}
	xs = testkit.DiskRuns(xs)
	var prev string
	for i, x := range xs {
		if len(x.Replicas) != 1 {
			t.Fatalf("extent %d has %d replicas", i, len(x.Replicas))
		}
		node := x.Replicas[0].Datanode
		if x.Index%128 == 0 && i > 0 && node == prev {
			t.Errorf("run at block %d stays on datanode %s", x.Index, node)
		}
		if x.Index%128 != 0 || (x.Count != 128 && x.Index+uint64(x.Count) != 600) {
			t.Errorf("extent %d: index %d count %d, want runs of 128", i, x.Index, x.Count)
		}
		prev = node
	}
	if len(xs) != 5 {
		t.Errorf("got %d extents for 600 blocks, want 5", len(xs))
	}
}

// TestRandomWritesThenReads writes at random offsets (copy-on-write of
// partial blocks), commits, and reads back at random offsets against a
// model.
func TestRandomWritesThenReads(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	model := make([]byte, 0)
	rng := mrand.New(mrand.NewPCG(1, 2))
	for round := 0; round < 4; round++ {
		err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			var f *client.File
			var err error
			if round == 0 {
				f, err = tx.CreateFile(ctx, "/rw", client.CreateOptions{Rep: 2})
			} else {
				f, err = tx.Open(ctx, "/rw")
			}
			if err != nil {
				return err
			}
			clientx.SetFlushBlocks(f, 3)
			for i := 0; i < 40; i++ {
				off := rng.IntN(10 * bs)
				n := 1 + rng.IntN(2*bs)
				buf := testkit.RandomBytes(t, n)
				if _, err := f.WriteAt(buf, int64(off)); err != nil {
					return err
				}
				if off+n > len(model) {
					model = append(model, make([]byte, off+n-len(model))...)
				}
				copy(model[off:], buf)
				// Read back inside the transaction, before commit.
				chk := make([]byte, n)
				if _, err := f.ReadAt(chk, int64(off)); err != nil {
					return err
				}
				if !bytes.Equal(chk, buf) {
					return fmt.Errorf("read-your-writes mismatch at %d", off)
				}
			}
			if round == 3 {
				if err := f.Truncate(int64(len(model) / 2)); err != nil {
					return err
				}
				model = model[:len(model)/2]
				// Extending after a truncate must read zeros in the gap.
				if _, err := f.WriteAt([]byte{1}, int64(len(model)+100)); err != nil {
					return err
				}
				model = append(model, make([]byte, 101)...)
				model[len(model)-1] = 1
			}
			return f.Close()
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	tx := cl.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, "/rw")
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != int64(len(model)) {
		t.Fatalf("size %d, model %d", f.Size(), len(model))
	}
	for i := 0; i < 200; i++ {
		off := rng.IntN(len(model))
		n := min(1+rng.IntN(3*bs), len(model)-off)
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, int64(off)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, model[off:off+n]) {
			t.Fatalf("mismatch reading %d bytes at %d", n, off)
		}
	}
	var all bytes.Buffer
	if _, err := f.WriteTo(&all); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all.Bytes(), model) {
		t.Fatal("sequential read differs from model")
	}
	if out := c.MustRun("fsck"); !strings.Contains(out, "0 problems") {
		t.Fatalf("fsck: %s", out)
	}
}
