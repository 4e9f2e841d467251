package powercut

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Journaled small appends (client.Config.JournalSmallWrites; internal/
// namenode/journal.go): a durable commit of a small append into a file's
// last block skips the datanodes' sync, its bytes made durable by the
// namenode's commit log. The namenode here never has the datanodes sync
// them in the background (-journal-settle 24h), so after a power cut
// every appended byte is on the datanodes again only because the
// namenode handed it back at their registration. Both tests fail when
// the registration hands nothing back (journalFor returning nil): the
// files' last blocks then fail their checksums on both replicas.

// journalNamenodeArgs: the namenode never syncs journaled writes' datanodes
// in the background, nor makes anything durable but at durable commits.
var journalNamenodeArgs = []string{"-journal-settle", "24h", "-sync-interval", "1h", "-sync-commits", "1000000"}

// journalDatanodeArgs: the datanodes log what they apply (checkJournaled).
var journalDatanodeArgs = []string{"-log-level", "info"}

// journalAppend appends rec to path in a durable transaction of its own
// (retried on a conflict).
func journalAppend(t *testing.T, cl *client.Client, path string, rec []byte) {
	t.Helper()
	for {
		err := cl.Txn(context.Background(), func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, path)
			if err != nil {
				return err
			}
			_, err = f.WriteAt(rec, f.Size())
			return err
		})
		if !errors.Is(err, client.ErrConflict) {
			testkit.MustOK(t, "append to "+path, err)
			return
		}
	}
}

// checkJournaled reads every file back byte-exact through a client that
// reads over TCP and one that may read short-circuit, checks fsck, and
// checks that a datanode applied journaled writes handed back by the
// namenode (so the appends were journaled, not synced by the client).
func checkJournaled(t *testing.T, c *clustertest.PowerCutProcs, files map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	for _, cfg := range []client.Config{{NoShortCircuit: true}, {}} {
		cl := c.Client(cfg)
		for path, want := range files {
			tx := cl.Begin()
			f, err := tx.Open(ctx, path)
			if err != nil {
				t.Fatalf("open %s after the power cut: %v", path, err)
			}
			var got bytes.Buffer
			if _, err := f.WriteTo(&got); err != nil {
				t.Fatalf("read %s after the power cut (its journaled appends were not restored to the datanodes?): %v", path, err)
			}
			tx.Abort(ctx)
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("%s reads back %d bytes after the power cut, want %d (equal: %v)", path, got.Len(), len(want), bytes.Equal(got.Bytes(), want))
			}
		}
		rep, err := cl.Fsck(ctx)
		testkit.MustOK(t, "fsck", err)
		if len(rep.Problems) > 0 {
			t.Fatalf("fsck after the power cut: %v", rep.Problems)
		}
		cl.Close()
	}
	c.MustRun("fsck")
	applied := false
	for _, p := range c.DNs {
		b, err := os.ReadFile(p.Log)
		testkit.MustOK(t, "read the datanode's log", err)
		applied = applied || strings.Contains(string(b), "journaled writes from the namenode applied")
	}
	if !applied {
		t.Fatal("no datanode applied journaled writes at its registration: the appends were not journaled")
	}
}

// TestPowerCutKeepsJournaledAppends: 64-byte appends, each committed
// durably with its bytes journaled, into a small file and into one whose
// last block is nearly full, then a power cut of every process and disk:
// every appended byte reads back byte-exact (over TCP and short-circuit),
// fsck is clean, and appends after the restart work.
func TestPowerCutKeepsJournaledAppends(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: journalNamenodeArgs, DatanodeArgs: journalDatanodeArgs})
	bs := int(c.Opts.Blocksize)
	cl := c.Client(client.Config{JournalSmallWrites: true})
	files := map[string][]byte{
		"/small": testkit.SeededBytes(100, 1),
		"/big":   testkit.SeededBytes(bs+bs*15/16, 2), // last block 15/16 full
	}
	for path, data := range files {
		testkit.WriteRep2(t, cl, path, data)
	}
	for k := 0; k < 25; k++ {
		for _, path := range []string{"/small", "/big"} {
			rec := testkit.SeededBytes(64, uint64(1000+k*2+len(path)))
			journalAppend(t, cl, path, rec)
			files[path] = append(files[path], rec...)
		}
	}
	cl.Close()
	c.PowerCut()
	checkJournaled(t, c, files)
	after := c.Client(client.Config{JournalSmallWrites: true})
	defer after.Close()
	for path := range files {
		rec := testkit.SeededBytes(64, uint64(len(path)))
		journalAppend(t, after, path, rec)
		files[path] = append(files[path], rec...)
		if got := testkit.ReadFile(t, after, path); !bytes.Equal(got, files[path]) {
			t.Fatalf("%s after an append following the power cut: %d bytes, want %d", path, len(got), len(files[path]))
		}
	}
}

// TestPowerCutJournaledAppendsAcrossLogRestart: enough journaled appends
// that the namenode's commit log (64 KiB) is checkpointed and started over
// several times while their datanodes never synced: the pending journaled
// writes are carried into each new log, so after a power cut every
// appended byte still reads back. Fails also when the carry is left out
// (checkpointer.carry nil).
func TestPowerCutJournaledAppendsAcrossLogRestart(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: append([]string{"-log-size", "64K"}, journalNamenodeArgs...), DatanodeArgs: journalDatanodeArgs})
	cl := c.Client(client.Config{JournalSmallWrites: true})
	files := map[string][]byte{}
	for i := 0; i < 4; i++ {
		path := fmt.Sprintf("/log%d", i)
		files[path] = testkit.SeededBytes(1000+i*777, uint64(i))
		testkit.WriteRep2(t, cl, path, files[path])
	}
	// Each append's record is about 200 bytes of block list and metadata
	// plus 256 bytes of data: 600 appends log well over 64 KiB.
	for k := 0; k < 150; k++ {
		for i := 0; i < 4; i++ {
			path := fmt.Sprintf("/log%d", i)
			rec := testkit.SeededBytes(256, uint64(10000+k*4+i))
			journalAppend(t, cl, path, rec)
			files[path] = append(files[path], rec...)
		}
	}
	cl.Close()
	c.PowerCut()
	checkJournaled(t, c, files)
}

// TestPowerCutKeepsJournaledAppendsThroughMount: the same through a mount
// whose client journals ($PLASMAFS_JOURNAL_SMALL_WRITES=1): a file written
// and closed, then 64-byte appends each followed by fsync, the mount
// killed and the power cut: every fsynced byte reads back, through the
// library and through a new mount (another process).
func TestPowerCutKeepsJournaledAppendsThroughMount(t *testing.T) {
	t.Setenv("PLASMAFS_JOURNAL_SMALL_WRITES", "1")
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: journalNamenodeArgs, DatanodeArgs: journalDatanodeArgs})
	m := testkit.StartMount(t, c.Procs, "rep=2")
	want := testkit.SeededBytes(3000, 5)
	testkit.MustOK(t, "write through the mount", os.WriteFile(m.Path("/log"), want, 0o644))
	f, err := os.OpenFile(m.Path("/log"), os.O_WRONLY|os.O_APPEND, 0)
	testkit.MustOK(t, "open for appending", err)
	for k := 0; k < 30; k++ {
		rec := testkit.SeededBytes(64, uint64(100+k))
		_, err := f.Write(rec)
		testkit.MustOK(t, "append through the mount", err)
		testkit.MustOK(t, "fsync through the mount", f.Sync())
		want = append(want, rec...)
	}
	m.Signal(syscall.SIGKILL)
	m.Wait()
	f.Close()
	c.PowerCut()
	checkJournaled(t, c, map[string][]byte{"/log": want})
	m2 := testkit.StartMount(t, c.Procs, "")
	got, err := os.ReadFile(m2.Path("/log"))
	testkit.MustOK(t, "read through a new mount", err)
	if !bytes.Equal(got, want) {
		t.Fatalf("a new mount reads %d bytes of /log after the power cut, want %d", len(got), len(want))
	}
}
