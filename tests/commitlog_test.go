package tests

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// commitMany commits n directory creations from each of w clients, durable
// or async, and returns the names acknowledged.
func commitMany(t *testing.T, c *clustertest.Procs, tag string, w, n int, d client.Durability) []string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		cl := c.Client(client.Config{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for j := 0; j < n; j++ {
				name := fmt.Sprintf("%s%d-%04d-", tag, i, j)
				// Long names make the log fill (and start over) quickly.
				name += fmt.Sprintf("%0200d", j)
				if _, err := cl.Auto(d).MkdirAt(ctx, 1, name, 0); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked
}

func checkPresent(t *testing.T, c *clustertest.Procs, names []string) {
	t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	tx, _ := cl.Begin(context.Background())
	defer tx.Abort(context.Background())
	ents, err := tx.ReadDir(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, e := range ents {
		have[e.Name] = true
	}
	missing := 0
	for _, n := range names {
		if !have[n] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged commits missing", missing, len(names))
	}
}

// TestCommitLogRestartsSurviveKill: with a small commit log, the log is
// checkpointed into the database and started over many times while
// clients commit; kill -9 of the namenode in the middle of that loses
// nothing acknowledged, durable or async (process crash: the page cache
// survives), and a restart replays what the database lacks.
func TestCommitLogRestartsSurviveKill(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-log-size", "64K"}})
	acked := commitMany(t, c, "r1", 3, 150, client.Durable)
	acked = append(acked, commitMany(t, c, "r2", 3, 150, client.Async)...)
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(2)
	checkPresent(t, c, acked)
	// And once more after the replay, with the log started over.
	acked = append(acked, commitMany(t, c, "r3", 2, 100, client.Durable)...)
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(2)
	checkPresent(t, c, acked)
}

// TestCommitLogRestartsSurvivePowerCut: the same across a power cut,
// where only fsynced data survives: every durable commit is there.
func TestCommitLogRestartsSurvivePowerCut(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: []string{"-log-size", "64K"}})
	acked := commitMany(t, c.Procs, "r4", 3, 150, client.Durable)
	c.PowerCut()
	checkPresent(t, c.Procs, acked)
	acked = append(acked, commitMany(t, c.Procs, "r5", 2, 100, client.Durable)...)
	c.PowerCut()
	checkPresent(t, c.Procs, acked)
}
