package extend

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestExtensionPowerCutAfterCommittedAndUncommittedAppends: committed
// appends to rep-2 files, then extensions that are not committed: one
// still open, one aborted, and in a second file one made durable on the
// datanodes by another transaction's commit (which syncs the same
// volumes), so after the cut the datanodes hold bytes and checksums of a
// version nobody committed. The power fails. Every committed byte must
// read back (short-circuit and through the datanodes), none of the
// uncommitted ones, fsck (library and CLI) must be clean, and appends
// after the restart must work and read back.
func TestExtensionPowerCutAfterCommittedAndUncommittedAppends(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{}
	for i, path := range []string{"/p1", "/p2", "/p3"} {
		base := testkit.SeededBytes(20000+i*30000, uint64(i))
		testkit.WriteRep2(t, cl, path, base)
		files[path] = base
		for k := 0; k < 10; k++ {
			add := testkit.SeededBytes(1+k*331%2000, uint64(10*i+k))
			testkit.MustOK(t, "append", appAppend(ctx, cl, path, add))
			files[path] = append(files[path], add...)
		}
	}
	evil := bytes.Repeat([]byte{0xA5}, 7000)
	// /p1: an extension left open.
	w1 := c.Client(client.Config{})
	defer w1.Close()
	appFlushed(t, ctx, w1, "/p1", evil)
	// /p2: an aborted extension.
	tx2, _ := appFlushed(t, ctx, cl, "/p2", evil)
	testkit.MustOK(t, "abort", tx2.Abort(ctx))
	// /p3: an aborted extension, then a commit elsewhere that syncs the
	// volumes (a new rep-2 file lands on both datanodes).
	tx3, _ := appFlushed(t, ctx, cl, "/p3", evil)
	testkit.MustOK(t, "abort", tx3.Abort(ctx))
	testkit.WriteRep2(t, cl, "/sync", testkit.SeededBytes(5000, 77))
	files["/sync"] = testkit.SeededBytes(5000, 77)

	c.PowerCut()

	after := c.Client(client.Config{})
	defer after.Close()
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	for path, want := range files {
		appCheck(t, "after the power cut", path, want, after, tcp)
	}
	if p := fsckProblems(t, after); len(p) > 0 {
		t.Fatalf("fsck after the power cut: %q", p)
	}
	c.MustRun("fsck")
	for path := range files {
		for k := 0; k < 3; k++ {
			add := testkit.SeededBytes(100+k, uint64(len(path)*7+k))
			testkit.MustOK(t, "append after the power cut", appAppend(ctx, after, path, add))
			files[path] = append(files[path], add...)
		}
		appCheck(t, "appends after the power cut", path, files[path], after, tcp)
	}
	if p := fsckProblems(t, after); len(p) > 0 {
		t.Fatalf("fsck after appends following the power cut: %q", p)
	}
}

// TestExtensionPowerCutDuringConcurrentAppends: three clients append
// self-checking records to two rep-2 files while the power fails. After
// the restart every acknowledged record is there exactly once, the files
// consist of whole, intact records only (no torn or uncommitted bytes),
// records whose commit failed appear at most once, fsck is clean, and
// appending goes on.
func TestExtensionPowerCutDuringConcurrentAppends(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	paths := []string{"/a", "/b"}
	for _, p := range paths {
		testkit.WriteRep2(t, admin, p, appRecord(99, 0, rand.New(rand.NewPCG(1, 1)), 3000))
	}
	type result struct {
		acked, doubt map[appID]string // record → path
	}
	const writers = 3
	results := make([]result, writers)
	var total atomic.Int64
	enough := make(chan struct{})
	var once sync.Once
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		cl := c.Client(client.Config{NoShortCircuit: w == 1})
		defer cl.Close()
		results[w] = result{map[appID]string{}, map[appID]string{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 5))
			for seq := 0; !stop.Load() && seq < 400; seq++ {
				path := paths[r.IntN(len(paths))]
				maxLen := 1500
				if seq%9 == 4 {
					maxLen = 40000
				}
				err := appAppend(ctx, cl, path, appRecord(w, seq, r, maxLen))
				if err == nil {
					results[w].acked[appID{w, seq}] = path
					if total.Add(1) >= 30 {
						once.Do(func() { close(enough) })
					}
				} else {
					// The power failed (or is failing): stop here, so
					// nothing is written while the cluster restarts.
					results[w].doubt[appID{w, seq}] = path
					return
				}
			}
		}()
	}
	<-enough
	c.PowerCut()
	stop.Store(true)
	wg.Wait()

	after := c.Client(client.Config{})
	defer after.Close()
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	for _, cl := range []*client.Client{after, tcp} {
		for _, p := range paths {
			data, err := appRead(ctx, cl, p)
			testkit.MustOK(t, "read "+p+" after the power cut", err)
			ids, err := appParse(data)
			if err != nil {
				t.Fatalf("%s after the power cut: %v", p, err)
			}
			seen := map[appID]int{}
			for _, id := range ids {
				seen[id]++
				if id.w == 99 {
					continue
				}
				r := results[id.w]
				if r.acked[id] != p && r.doubt[id] != p {
					t.Errorf("%s holds record %v, which was never appended to it", p, id)
				}
			}
			for id, n := range seen {
				if n > 1 {
					t.Errorf("%s holds record %v %d times", p, id, n)
				}
			}
			for _, r := range results {
				for id, q := range r.acked {
					if q == p && seen[id] != 1 {
						t.Errorf("acknowledged record %v of %s is lost", id, p)
					}
				}
			}
		}
	}
	acked, doubt := 0, 0
	for _, r := range results {
		acked += len(r.acked)
		doubt += len(r.doubt)
	}
	t.Logf("%d appends acknowledged, %d failed", acked, doubt)
	if p := fsckProblems(t, after); len(p) > 0 {
		t.Fatalf("fsck after the power cut: %q", p)
	}
	for _, p := range paths {
		testkit.MustOK(t, "append after the power cut", appAppend(ctx, after, p, appRecord(98, 1, rand.New(rand.NewPCG(2, 2)), 500)))
		data, err := appRead(ctx, tcp, p)
		testkit.MustOK(t, "read", err)
		if _, err := appParse(data); err != nil {
			t.Fatalf("%s after an append following the power cut: %v", p, err)
		}
	}
	if p := fsckProblems(t, after); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}
