package smallfiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestKillEverythingMidTreeKeepsFsyncedFiles: six writers put a tree of
// small files through a FUSE mount (replication 2, sparse volumes), each
// file created, written, fsynced and closed, every fifth one deleted again;
// the namenode, both datanodes and the mount are killed (SIGKILL) together
// mid-tree and restarted. Every file whose fsync and close returned (and
// that was not deleted) reads back byte-exact, fsck is clean, and once the
// datanodes' registrations are reconciled each volume holds exactly the
// pages of the files there are (its entries, and its data file's pages:
// none left by blocks written for transactions the kill ended, by releases
// not sent, or by writes cut between data and entry), as 'plasma df' says.
// Fails without the registration's slot report (the volumes keep the
// pages of blocks no file holds, counted as used).
func TestKillEverythingMidTreeKeepsFsyncedFiles(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 1 << 20, Size: 64 << 20, Sparse: true})
	m := testkit.StartMount(t, c, "rep=2")
	tr := newTree("/k", 4000, 50, 31)
	byDir := map[string][]int{}
	for i, p := range tr.paths {
		byDir[filepath.Dir(p)] = append(byDir[filepath.Dir(p)], i)
	}
	var mu sync.Mutex
	acked := map[int]bool{} // fsynced and closed, not deleted
	enough := make(chan struct{})
	var once sync.Once
	jobs := make(chan string, len(byDir))
	for d := range byDir {
		jobs <- d
	}
	close(jobs)
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range jobs {
				if os.MkdirAll(m.Path(d), 0o755) != nil {
					return
				}
				for k, i := range byDir[d] {
					if writeSynced(m.Path(tr.paths[i]), tr.content(i)) != nil {
						return
					}
					mu.Lock()
					acked[i] = true
					if len(acked) >= 600 {
						once.Do(func() { close(enough) })
					}
					mu.Unlock()
					if k%5 == 4 {
						mu.Lock()
						delete(acked, i) // deleted or not after the kill: not checked
						mu.Unlock()
						if os.Remove(m.Path(tr.paths[i])) != nil {
							return
						}
					}
				}
			}
		}()
	}
	select {
	case <-enough:
	case <-waitGroupDone(&wg):
		t.Fatalf("the writers stopped before 600 files: %d", len(acked))
	}
	// Every process at once: signals first, then the waits.
	for _, p := range append([]*clustertest.Proc{c.NN}, c.DNs...) {
		syscall.Kill(p.Pid(), syscall.SIGKILL)
	}
	m.Signal(syscall.SIGKILL)
	for _, p := range append([]*clustertest.Proc{c.NN}, c.DNs...) {
		c.Kill(p)
	}
	m.Wait()
	wg.Wait() // the dead mount fails every writer
	syscall.Unmount(m.Dir, syscall.MNT_DETACH)
	mu.Lock()
	want := make([]int, 0, len(acked))
	for i := range acked {
		want = append(want, i)
	}
	mu.Unlock()
	sort.Ints(want)

	c.StartNamenode()
	for _, p := range c.DNs {
		c.StartDatanode(p)
	}
	c.WaitLive(len(c.DNs))
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	for _, i := range want {
		if got := testkit.ReadFile(t, cl, tr.paths[i]); !bytes.Equal(got, tr.content(i)) {
			t.Fatalf("%s, fsynced and closed before the kill, reads back as %d bytes (%d differ), want %d", tr.paths[i], len(got), testkit.CountDiff(got, tr.content(i)), tr.sizes[i])
		}
	}
	testkit.FsckClean(t, cl)

	// What the files there are hold, per replica (one block each).
	var pages int64
	files := 0
	for d := range byDir {
		var ents []client.DirEntry
		err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			var err error
			ents, err = tx.ReadDirPlus(ctx, d)
			return err
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		testkit.MustOK(t, "list "+d, err)
		for _, e := range ents {
			pages += pageRounded(int(e.Info.Size))
			files++
		}
	}
	awaitVolumes(t, c, fmt.Sprintf("each volume to hold the pages of the %d files there are (%d bytes), no more", files, pages), func(v volumeSlots) bool {
		return v.held == pages && v.kept == 0 && v.onDisk == pages && len(v.pastData) == 0
	})
	bs := int64(1 << 20)
	testkit.AwaitCond(t, 30*time.Second, "df to count the files' pages", func() bool {
		return df(t, c).Used == (2*pages+bs-1)/bs*bs
	})
}

// writeSynced creates path with data, fsyncs and closes it.
func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func waitGroupDone(wg *sync.WaitGroup) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch
}
