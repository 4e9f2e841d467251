package smallfiles

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestPowerCutKeepsFsyncedSmallFiles: clients write small files to sparse
// volumes, each committed durably (the commit is the fsync), deleting some
// as they go so that freed slots are released and reused; the power fails
// while they write. After the restart every acknowledged file reads back
// byte-exact, every acknowledged deletion stays, and fsck is clean.
func TestPowerCutKeepsFsyncedSmallFiles(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{Datanodes: 2, Blocksize: 1 << 20, Size: 64 << 20, Sparse: true})
	ctx := context.Background()
	const writers = 3
	var stop atomic.Bool
	var acked atomic.Int64
	present := make([]map[string][]byte, writers)
	gone := make([]map[string]bool, writers)
	var wg sync.WaitGroup
	for w := range writers {
		present[w], gone[w] = map[string][]byte{}, map[string]bool{}
		cl := c.Client(client.Config{})
		defer cl.Close()
		testkit.MustOK(t, "mkdir", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			_, err := tx.Mkdir(ctx, fmt.Sprintf("/w%d", w), 0o755)
			return err
		}))
		sizes := sourceLikeSizes(100000, uint64(100+w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				path := fmt.Sprintf("/w%d/f%06d", w, i)
				data := testkit.SeededBytes(sizes[i], uint64(w)<<32+uint64(i))
				victim := ""
				if i%3 == 2 {
					victim = fmt.Sprintf("/w%d/f%06d", w, i-2)
				}
				err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
					f, err := tx.CreateFile(ctx, path, client.CreateOptions{Rep: 2})
					if err != nil {
						return err
					}
					if _, err := f.Write(data); err != nil {
						return err
					}
					if victim != "" {
						return tx.Unlink(ctx, victim)
					}
					return nil
				})
				if err != nil {
					// The power is out. The commit may have been made
					// durable all the same: its deletion is uncertain.
					delete(present[w], victim)
					return
				}
				present[w][path] = data
				if victim != "" {
					delete(present[w], victim)
					gone[w][victim] = true
				}
				acked.Add(1)
			}
		}()
	}
	testkit.AwaitCond(t, 2*time.Minute, "300 acknowledged small writes", func() bool { return acked.Load() >= 300 })
	c.PowerCut()
	stop.Store(true)
	wg.Wait()

	cl := c.Client(client.Config{})
	defer cl.Close()
	for w := range writers {
		for path, data := range present[w] {
			if got := testkit.ReadFile(t, cl, path); !bytes.Equal(got, data) {
				t.Errorf("%s, acknowledged, reads back as %d bytes (%d differ), want %d", path, len(got), testkit.CountDiff(got, data), len(data))
			}
		}
		testkit.MustOK(t, "check deletions", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for path := range gone[w] {
				if _, err := tx.Lookup(ctx, path); err == nil {
					return fmt.Errorf("%s, deleted by an acknowledged commit, is back", path)
				}
			}
			return nil
		}))
	}
	testkit.FsckClean(t, cl)
}
