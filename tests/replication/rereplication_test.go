package replication

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Issue 23: the namenode keeps blocks at their file's replication by
// itself (internal/namenode/replicator.go, copy.go).

// replicaCounts returns, for file p, the datanode identities holding each
// block (by block index).
func replicaCounts(ctx context.Context, cl *client.Client, p string) (map[uint64][]string, error) {
	out := map[uint64][]string{}
	err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		clear(out)
		fi, err := tx.Lookup(ctx, p)
		if err != nil {
			return err
		}
		xs, err := tx.Blocks(ctx, fi.Ino)
		if err != nil {
			return err
		}
		for _, x := range xs {
			for k := uint64(0); k < uint64(x.Count); k++ {
				for _, r := range x.Replicas {
					out[x.Index+k] = append(out[x.Index+k], r.Datanode)
				}
			}
		}
		return nil
	})
	return out, err
}

// replicasWrong describes how file p's replicas differ from want replicas
// per block on distinct datanodes, none of them in avoid ("" if they do
// not).
func replicasWrong(ctx context.Context, cl *client.Client, p string, want int, avoid map[string]bool) string {
	blocks, err := replicaCounts(ctx, cl, p)
	if err != nil {
		return err.Error()
	}
	for idx, nodes := range blocks {
		seen := map[string]bool{}
		for _, n := range nodes {
			if avoid[n] {
				return fmt.Sprintf("%s: block %d has a replica on datanode %s", p, idx, n)
			}
			seen[n] = true
		}
		if len(nodes) != want || len(seen) != want {
			return fmt.Sprintf("%s: block %d has replicas on %v, want %d", p, idx, nodes, want)
		}
	}
	return ""
}

// awaitReplicas polls until every file has want replicas per block (none
// in avoid) and fsck finds no problem, for at most limit.
func awaitReplicas(t *testing.T, c *clustertest.Procs, cl *client.Client, files map[string][]byte, want int, avoid map[string]bool, limit time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(limit)
	for {
		wrong := ""
		for p := range files {
			if wrong = replicasWrong(ctx, cl, p, want, avoid); wrong != "" {
				break
			}
		}
		// Bounded work: no datanode takes part in more copies at a time
		// than the namenode's -copies-per-node (default 2).
		for _, line := range strings.Split(strings.TrimSpace(c.MustRun("admin", "datanodes", "-json")), "\n") {
			var row struct {
				Identity string `json:"identity"`
				Copies   int    `json:"copies"`
			}
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatalf("admin datanodes -json: %v: %s", err, line)
			}
			if row.Copies > 2 {
				t.Fatalf("datanode %s takes part in %d copies at a time, more than 2", row.Identity, row.Copies)
			}
		}
		if wrong == "" {
			out, code := c.Run(nil, "fsck")
			if code == 0 && strings.Contains(out, " 0 problems") {
				return
			}
			wrong = fmt.Sprintf("fsck exit %d:\n%s", code, out)
		}
		if time.Now().After(deadline) {
			status, _ := c.Run(nil, "admin", "datanodes")
			t.Fatalf("after %v: %s\n%s", limit, wrong, status)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition, not timing the test
	}
}

// checkContents reads every file back and compares it byte for byte.
func checkContents(t *testing.T, c *clustertest.Procs, files map[string][]byte) {
	t.Helper()
	for p, err := range testkit.ReadAllFiles(t, c, files, true) {
		t.Errorf("read %s: %v", p, err)
	}
}

// identityOf returns the identity of datanode process p.
func identityOf(t *testing.T, c *clustertest.Procs, p *clustertest.Proc) string {
	t.Helper()
	id := testkit.DatanodeIdentities(t, c)[p.Addr]
	if id == "" {
		t.Fatalf("no datanode registered at %s", p.Addr)
	}
	return id
}

// TestReReplicationAfterDatanodeDeath: with 3 datanodes and replication
// 2, one datanode is killed for good while files are being written; once
// it has been dead for the namenode's -dead-after, every acknowledged file
// is back at 2 replicas on the survivors, byte for byte, and fsck is
// clean.
func TestReReplicationAfterDatanodeDeath(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3, Size: 64 << 20, NamenodeArgs: []string{"-dead-after", "2s"}})
	victim := identityOf(t, c, c.DNs[0])
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()

	var mu sync.Mutex
	files := map[string][]byte{}
	stop := make(chan struct{})
	written := make(chan struct{}, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w := c.Client(client.Config{})
		defer w.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := fmt.Sprintf("/f%03d", i)
			data := testkit.RandomBytes(t, 1+(i*37<<10)%(700<<10))
			if _, err := w.CopyIn(ctx, bytes.NewReader(data), p, client.CopyOptions{Rep: 2}); err != nil {
				continue // not acknowledged: it may or may not exist
			}
			mu.Lock()
			files[p] = data
			mu.Unlock()
			written <- struct{}{}
		}
	}()
	for range 6 {
		<-written
	}
	c.Kill(c.DNs[0])
	for range 6 {
		<-written
	}
	close(stop)
	<-done

	if out := c.MustRun("admin", "datanodes"); !strings.Contains(out, "dead") && !strings.Contains(out, "down") {
		t.Errorf("admin datanodes does not show the killed datanode down or dead:\n%s", out)
	}
	awaitReplicas(t, c, cl, files, 2, map[string]bool{victim: true}, 120*time.Second)
	checkContents(t, c, files)
	out := c.MustRun("admin", "datanodes")
	if !strings.Contains(out, "dead") || !strings.Contains(out, "0 with no live replica") {
		t.Errorf("admin datanodes after re-replication:\n%s", out)
	}
}

// TestSetrepCarriedOut: raising a file's replication has the namenode copy
// its blocks, lowering it trims the extra replicas.
func TestSetrepCarriedOut(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3, Size: 64 << 20})
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{"/a": testkit.RandomBytes(t, 1<<20+123), "/b": testkit.RandomBytes(t, 5000)}
	for p, data := range files {
		testkit.WriteFile(t, cl, p, data, 1)
	}
	awaitReplicas(t, c, cl, files, 1, nil, 60*time.Second)
	c.MustRun("setrep", "3", "/a", "/b")
	awaitReplicas(t, c, cl, files, 3, nil, 120*time.Second)
	checkContents(t, c, files)

	// The new replicas are recorded durably: after a crash of the
	// namenode they are there, and not because it copied them again.
	if err := cl.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(3)
	cl = c.Client(client.Config{})
	defer cl.Close()
	for p := range files {
		if w := replicasWrong(context.Background(), cl, p, 3, nil); w != "" {
			t.Fatalf("after a namenode crash: %s", w)
		}
	}
	if out := c.MustRun("admin", "datanodes"); !strings.Contains(out, "since start 0 copied") {
		t.Fatalf("the restarted namenode copied blocks again:\n%s", out)
	}
	c.MustRun("setrep", "1", "/a", "/b")
	awaitReplicas(t, c, cl, files, 1, nil, 120*time.Second)
	checkContents(t, c, files)
	// The trimmed replicas' blocks are free again once nobody can read
	// them: the datanodes together use what the files need.
	var status struct {
		Used uint64 `json:"used"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var used uint64
		for _, line := range strings.Split(strings.TrimSpace(c.MustRun("admin", "datanodes", "-json")), "\n") {
			if err := json.Unmarshal([]byte(line), &status); err != nil {
				t.Fatalf("admin datanodes -json: %v: %s", err, line)
			}
			used += status.Used
		}
		bs := uint64(c.Opts.Blocksize)
		want := ((1<<20+123+bs-1)/bs + 1) * bs // /a's blocks and /b's one, once each
		if used == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("datanodes use %d bytes after setrep 1, want %d", used, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDrainUnderReader: draining a datanode moves every replica off it
// while a reader keeps reading every file without an error; the datanode
// ends empty and the files are intact.
func TestDrainUnderReader(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3, Size: 64 << 20})
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{}
	for i := range 8 {
		p := fmt.Sprintf("/d%d", i)
		files[p] = testkit.RandomBytes(t, 1+i*150<<10)
		testkit.WriteFile(t, cl, p, files[p], 2)
	}
	drained := identityOf(t, c, c.DNs[1])

	stop := make(chan struct{})
	var reads int
	readErr := make(chan error, 1)
	go func() {
		r := c.Client(client.Config{NoShortCircuit: true})
		defer r.Close()
		for {
			for p, want := range files {
				select {
				case <-stop:
					readErr <- nil
					return
				default:
				}
				var got []byte
				err := r.Txn(context.Background(), func(ctx context.Context, tx *client.Txn) error {
					f, err := tx.Open(ctx, p)
					if err != nil {
						return err
					}
					got, err = io.ReadAll(f)
					return err
				})
				if err == nil && !bytes.Equal(got, want) {
					err = fmt.Errorf("read %d bytes, not the %d written", len(got), len(want))
				}
				if err != nil {
					readErr <- fmt.Errorf("reader during the drain: %s: %w", p, err)
					return
				}
				reads++
			}
		}
	}()
	c.MustRun("admin", "datanode", "drain", drained)
	// Polled with a deadline here ('drain -wait' has none).
	for deadline := time.Now().Add(120 * time.Second); ; {
		row := datanodeRowOf(t, c, drained)
		if row.Service == "drained" && row.Replicas == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("datanode %s not drained after 120s: %+v\n%s", drained, row, c.MustRun("admin", "datanodes"))
		}
		time.Sleep(100 * time.Millisecond) // polling a condition, not timing the test
	}
	close(stop)
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
	if out := c.MustRun("admin", "datanode", "drain", drained, "-wait"); !strings.HasSuffix(out, "drained\n") {
		t.Errorf("drain -wait of a drained datanode:\n%s", out)
	}
	t.Logf("%d reads during the drain", reads)
	awaitReplicas(t, c, cl, files, 2, map[string]bool{drained: true}, 60*time.Second)
	checkContents(t, c, files)
	// New files go elsewhere; enabling it puts it back in service.
	testkit.WriteFile(t, cl, "/after", testkit.RandomBytes(t, 300<<10), 2)
	if w := replicasWrong(context.Background(), cl, "/after", 2, map[string]bool{drained: true}); w != "" {
		t.Errorf("a file written after the drain: %s", w)
	}
	c.MustRun("admin", "datanode", "enable", drained)
	if out := c.MustRun("admin", "datanodes"); !strings.Contains(out, "in service") || strings.Contains(out, "drain") {
		t.Errorf("after enable:\n%s", out)
	}
}

// datanodeStatusRow is a row of 'plasma admin datanodes -json'.
type datanodeStatusRow struct {
	Identity string `json:"identity"`
	Service  string `json:"service"`
	Replicas uint64 `json:"replicas"`
	Used     uint64 `json:"used"`
}

// datanodeRowOf returns the row of the datanode with identity id.
func datanodeRowOf(t *testing.T, c *clustertest.Procs, id string) datanodeStatusRow {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(c.MustRun("admin", "datanodes", "-json")), "\n") {
		var row datanodeStatusRow
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("admin datanodes -json: %v: %s", err, line)
		}
		if row.Identity == id {
			return row
		}
	}
	t.Fatalf("admin datanodes -json lists no datanode %s", id)
	return datanodeStatusRow{}
}

// TestReturningDatanodeStaleReplicas: a datanode that comes back after its
// replicas were replaced (the files meanwhile rewritten or deleted) serves
// none of its old blocks as current: the files keep their replicas on the
// others, and new files that get blocks on it read back byte for byte.
func TestReturningDatanodeStaleReplicas(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3, Size: 64 << 20, NamenodeArgs: []string{"-dead-after", "1s"}})
	victim := identityOf(t, c, c.DNs[0])
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{}
	for i := range 6 {
		p := fmt.Sprintf("/s%d", i)
		files[p] = testkit.RandomBytes(t, 100<<10+i*77<<10)
		testkit.WriteFile(t, cl, p, files[p], 2)
	}
	c.Kill(c.DNs[0])
	awaitReplicas(t, c, cl, files, 2, map[string]bool{victim: true}, 120*time.Second)
	// While it is away, files change: its blocks hold what no file holds.
	for i, p := range []string{"/s0", "/s1", "/s2"} {
		c.MustRun("rm", p)
		if i == 0 {
			delete(files, p)
			continue
		}
		files[p] = testkit.RandomBytes(t, len(files[p]))
		testkit.WriteFile(t, cl, p, files[p], 2)
	}
	c.StartDatanode(c.DNs[0])
	c.WaitLive(3)
	awaitReplicas(t, c, cl, files, 2, map[string]bool{victim: true}, 60*time.Second)
	checkContents(t, c, files)
	// New files of replication 3 have a replica on it, written over its
	// stale blocks, and read back right from every replica.
	fresh := map[string][]byte{}
	for i := range 4 {
		p := fmt.Sprintf("/new%d", i)
		fresh[p] = testkit.RandomBytes(t, 200<<10+i*50<<10)
		testkit.WriteFile(t, cl, p, fresh[p], 3)
	}
	awaitReplicas(t, c, cl, fresh, 3, nil, 60*time.Second)
	checkContents(t, c, fresh)
	for p, err := range testkit.ReadAllFiles(t, c, fresh, false) {
		t.Errorf("read %s (short-circuit): %v", p, err)
	}
}

// replicaRuns returns the (datanode address, block) of each replica of
// block idx of file p.
func replicaRuns(ctx context.Context, cl *client.Client, p string, idx uint64) ([][2]any, error) {
	var out [][2]any
	err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		out = out[:0]
		fi, err := tx.Lookup(ctx, p)
		if err != nil {
			return err
		}
		xs, err := tx.Blocks(ctx, fi.Ino)
		if err != nil {
			return err
		}
		for _, x := range xs {
			if x.Index <= idx && idx < x.Index+uint64(x.Count) {
				for _, r := range x.Replicas {
					out = append(out, [2]any{r.Addr, r.Start + idx - x.Index})
				}
			}
		}
		return nil
	})
	return out, err
}

// TestScrubHealsDamagedBlock: a byte flipped in a block on a datanode's
// disk is found by that datanode's scrubber and the replica is replaced
// from the good one, before anybody reads the file; then the file reads
// back byte for byte and fsck is clean.
func TestScrubHealsDamagedBlock(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3, Size: 16 << 20, DatanodeArgs: []string{"-scrub-interval", "1s", "-scrub-rate", "1073741824"}})
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{"/s": testkit.RandomBytes(t, 300<<10)}
	testkit.WriteFile(t, cl, "/s", files["/s"], 2)
	const idx = 2
	damaged := flipReplicaByte(t, c, cl, "/s", idx)
	// No read of /s until the damaged replica is replaced.
	awaitReplaced(t, c, cl, "/s", idx, damaged)
	awaitReplicas(t, c, cl, files, 2, nil, 60*time.Second)
	checkContents(t, c, files)
}

// TestFsckDamageHealed: a damaged replica fsck finds is replaced from the
// good one (no scrubber runs here).
func TestFsckDamageHealed(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3, Size: 16 << 20})
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{"/s": testkit.RandomBytes(t, 300<<10)}
	testkit.WriteFile(t, cl, "/s", files["/s"], 2)
	damaged := flipReplicaByte(t, c, cl, "/s", 3)
	if out, code := c.Run(nil, "fsck"); code != 1 || !strings.Contains(out, "does not match its checksum") {
		t.Fatalf("fsck of a damaged replica: exit %d:\n%s", code, out)
	}
	awaitReplaced(t, c, cl, "/s", 3, damaged)
	awaitReplicas(t, c, cl, files, 2, nil, 60*time.Second)
	checkContents(t, c, files)
}

// flipReplicaByte damages the first replica of block idx of file p on its
// datanode's disk and returns it (address, block).
func flipReplicaByte(t *testing.T, c *clustertest.Procs, cl *client.Client, p string, idx uint64) [2]any {
	t.Helper()
	runs, err := replicaRuns(context.Background(), cl, p, idx)
	if err != nil || len(runs) != 2 {
		t.Fatalf("replicas of block %d: %v %v", idx, runs, err)
	}
	flipByteAt(t, c, runs[0])
	return runs[0]
}

// flipByteAt damages replica r (datanode address, block) on its
// datanode's disk.
func flipByteAt(t *testing.T, c *clustertest.Procs, damaged [2]any) {
	t.Helper()
	var dir string
	for _, d := range c.DNs {
		if d.Addr == damaged[0].(string) {
			dir = d.Dir
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "data"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := int64(damaged[1].(uint64))*c.Opts.Blocksize + 1000
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// awaitReplaced polls until block idx of p has two replicas, neither the
// damaged one.
func awaitReplaced(t *testing.T, c *clustertest.Procs, cl *client.Client, p string, idx uint64, damaged [2]any) {
	t.Helper()
	for deadline := time.Now().Add(120 * time.Second); ; {
		runs, err := replicaRuns(context.Background(), cl, p, idx)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 2 && runs[0] != damaged && runs[1] != damaged {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("block %d replicas after 120s: %v, the damaged one is %v\n%s", idx, runs, damaged, c.MustRun("admin", "datanodes"))
		}
		time.Sleep(100 * time.Millisecond) // polling a condition, not timing the test
	}
}

// TestBalanceAfterAddingDatanode: after a datanode is added, 'plasma
// admin balance' moves replicas to it until every datanode is within the
// balancer's slack of the average use; the files stay intact.
func TestBalanceAfterAddingDatanode(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Size: 16 << 20})
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{}
	for i := range 12 {
		p := fmt.Sprintf("/b%d", i)
		files[p] = testkit.RandomBytes(t, 1<<20)
		testkit.WriteFile(t, cl, p, files[p], 1)
	}
	added := c.AddDatanode()
	c.WaitLive(3)
	fresh := identityOf(t, c, added)
	if out := c.MustRun("admin", "balance"); !strings.Contains(out, "balancing started") {
		t.Fatalf("admin balance:\n%s", out)
	}
	type row struct {
		Identity string `json:"identity"`
		Capacity uint64 `json:"capacity"`
		Replicas uint64 `json:"replicas"`
	}
	var spread float64
	for deadline := time.Now().Add(120 * time.Second); ; {
		lo, hi, onFresh := 1.0, 0.0, uint64(0)
		for _, line := range strings.Split(strings.TrimSpace(c.MustRun("admin", "datanodes", "-json")), "\n") {
			var r row
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			u := float64(r.Replicas*uint64(c.Opts.Blocksize)) / float64(r.Capacity)
			lo, hi = min(lo, u), max(hi, u)
			if r.Identity == fresh {
				onFresh = r.Replicas
			}
		}
		spread = hi - lo
		if onFresh > 0 && spread <= 0.1 && strings.Contains(c.MustRun("admin", "balance"), "balanced") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not balanced after 120s (use spread %.2f, %d blocks on the new datanode):\n%s", spread, onFresh, c.MustRun("admin", "datanodes"))
		}
		time.Sleep(100 * time.Millisecond) // polling a condition, not timing the test
	}
	awaitReplicas(t, c, cl, files, 1, nil, 60*time.Second)
	checkContents(t, c, files)
}
