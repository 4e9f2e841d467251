package powercut

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Deferred data syncs (the default; client.Config.NoDeferDataSync turns
// them off): async commits whose
// data the datanodes have not synced; the namenode has them sync before
// the log fsync that makes the commits durable. Both tests fail when the
// namenode skips those syncs (internal/namenode/datasync.go).

// writeDeferred creates path with data (replication 2) and commits
// asynchronously without the datanodes' sync.
func writeDeferred(t *testing.T, cl *client.Client, path string, data []byte) {
	t.Helper()
	ctx := context.Background()
	tx := cl.Begin()
	f, err := tx.CreateFile(ctx, path, client.CreateOptions{Rep: 2})
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	if err := tx.CommitAsync(ctx); err != nil {
		t.Fatalf("commit %s: %v", path, err)
	}
}

// smallFile is the content of the i-th small file: sizes from a few bytes
// to a few pages, so both partly filled pages and blocks are cut.
func smallFile(t *testing.T, i int) []byte {
	return testkit.RandomBytes(t, 1+(i*3797)%13000)
}

// checkPrefix checks that of files 0..n-1 (names by name) what survives
// is a prefix, each byte-exact, at least min of them, and fsck is clean.
// It returns how many survived.
func checkPrefix(t *testing.T, cl *client.Client, n, atLeast int, name func(int) string, want func(int) []byte) int {
	t.Helper()
	ctx := context.Background()
	present, gap := 0, false
	for i := 0; i < n; i++ {
		_, err := cl.Lookup(ctx, name(i))
		switch {
		case err == nil && gap:
			t.Fatalf("%s survived but an earlier commit did not: not a prefix of the commit order", name(i))
		case err == nil:
			present++
			if got := testkit.ReadFile(t, cl, name(i)); !bytes.Equal(got, want(i)) {
				t.Fatalf("%s reads back wrong after the power cut (%d bytes, want %d): its commit survived without its data", name(i), len(got), len(want(i)))
			}
		case errors.Is(err, client.ErrNotFound):
			gap = true
		default:
			t.Fatal(err)
		}
	}
	if present < atLeast {
		t.Fatalf("%d files survived the power cut; the %d before the durability point must", present, atLeast)
	}
	rep, err := cl.Fsck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("fsck after the power cut: %v", rep.Problems)
	}
	return present
}

// TestPowerCutDeferredDataSyncDurablePoint: many small files committed
// asynchronously with their data unsynced, then one durable commit, then
// more async ones, then a power cut of every disk: every file before the
// durable commit reads back byte-exact, what survives after it is a
// prefix, fsck is clean.
func TestPowerCutDeferredDataSyncDurablePoint(t *testing.T) {
	// Only the durable commit makes anything durable here.
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: []string{"-sync-interval", "1h", "-sync-commits", "1000000"}})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	const before, after = 60, 20
	files := make([][]byte, before+after)
	name := func(i int) string { return fmt.Sprintf("/f%03d", i) }
	for i := range files {
		if i == before {
			if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
				_, err := tx.Mkdir(ctx, "/durable", 0o755)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		files[i] = smallFile(t, i)
		writeDeferred(t, cl, name(i), files[i])
	}
	cl.Close()
	c.PowerCut()
	cl = c.Client(client.Config{})
	defer cl.Close()
	if _, err := cl.Lookup(ctx, "/durable"); err != nil {
		t.Fatalf("the durable commit did not survive the power cut: %v", err)
	}
	n := checkPrefix(t, cl, len(files), before, name, func(i int) []byte { return files[i] })
	t.Logf("%d of %d files survived (%d before the durable commit)", n, len(files), before)
}

// TestPowerCutDeferredDataSyncWindow: no durable commit, only the
// namenode's own window (every 16 commits) makes async commits durable;
// after a power cut what survives is a prefix and every file of it reads
// back byte-exact.
func TestPowerCutDeferredDataSyncWindow(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: []string{"-sync-interval", "1h", "-sync-commits", "16"}})
	cl := c.Client(client.Config{})
	const count = 70
	files := make([][]byte, count)
	name := func(i int) string { return fmt.Sprintf("/w%03d", i) }
	for i := range files {
		files[i] = smallFile(t, i+1000)
		writeDeferred(t, cl, name(i), files[i])
	}
	cl.Close()
	c.PowerCut()
	cl = c.Client(client.Config{})
	defer cl.Close()
	// The window synced at least after the 48th commit's batch.
	n := checkPrefix(t, cl, count, 1, name, func(i int) []byte { return files[i] })
	t.Logf("%d of %d files survived", n, count)
}

// TestPowerCutDeferredDataSyncMount: the same through a mount, whose client
// defers the datanodes' syncs by default: small files
// written and closed (async commits), a directory made and the mount's root
// fsynced, more files closed, then a power cut: every file closed before
// the fsync reads back byte-exact, the rest is a prefix, fsck is clean.
func TestPowerCutDeferredDataSyncMount(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: []string{"-sync-interval", "1h", "-sync-commits", "1000000"}})
	m := testkit.StartMount(t, c.Procs, "rep=2")
	const before, after = 40, 15
	files := make([][]byte, before+after)
	name := func(i int) string { return fmt.Sprintf("/m%03d", i) }
	for i := range files {
		if i == before {
			// A durability point without data of its own: a file's fsync
			// would have its client sync both volumes itself, covering
			// the earlier files' blocks with it.
			testkit.MustOK(t, "mkdir", os.Mkdir(m.Path("durable"), 0o755))
			d, err := os.Open(m.Dir)
			testkit.MustOK(t, "open the mount's root", err)
			testkit.MustOK(t, "fsync the mount's root", d.Sync())
			d.Close()
		}
		files[i] = smallFile(t, i+2000)
		testkit.MustOK(t, "write through the mount", os.WriteFile(m.Path(name(i)), files[i], 0o644))
	}
	m.Signal(syscall.SIGKILL)
	m.Wait()
	c.PowerCut()
	cl := c.Client(client.Config{})
	defer cl.Close()
	if _, err := cl.Lookup(context.Background(), "/durable"); err != nil {
		t.Fatalf("the directory made durable by the fsync is gone after the power cut: %v", err)
	}
	n := checkPrefix(t, cl, len(files), before, name, func(i int) []byte { return files[i] })
	t.Logf("%d of %d files survived (%d closed before the fsync)", n, len(files), before)
}
