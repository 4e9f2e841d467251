package smallfiles

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestSmallFileTreeFitsThroughMount: the 20,000-file tree written through
// a FUSE mount (new files with two replicas) on sparse volumes of 1.4
// times its bytes fits, reads back byte-exact through the API, fsck is
// clean, and statfs through the mount counts the tree's pages as used
// (within a block per datanode), the rest as free. On fixed volumes the
// mount runs out of space after a few hundred files.
func TestSmallFileTreeFitsThroughMount(t *testing.T) {
	testkit.NeedFUSE(t)
	tr := newTree("/src", 20000, 200, 5)
	size := tr.bytes() * 14 / 10
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 1 << 20, Size: size, Sparse: true})
	m := testkit.StartMount(t, c, "rep=2")
	byDir := map[string][]int{}
	for i, p := range tr.paths {
		byDir[filepath.Dir(p)] = append(byDir[filepath.Dir(p)], i)
	}
	jobs := make(chan string)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for d := range jobs {
				if first != nil {
					continue
				}
				if first = os.MkdirAll(m.Path(d), 0o755); first != nil {
					continue
				}
				for _, i := range byDir[d] {
					if first = os.WriteFile(m.Path(tr.paths[i]), tr.content(i), 0o644); first != nil {
						break
					}
				}
			}
			errs <- first
		}()
	}
	for d := range byDir {
		jobs <- d
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("tree of %d bytes through the mount, volumes of %d bytes: %v", tr.bytes(), size, err)
		}
	}
	cl := c.Client(client.Config{})
	defer cl.Close()
	tr.check(t, context.Background(), cl, 4)
	testkit.FsckClean(t, cl)

	var pages int64
	for _, s := range tr.sizes {
		pages += pageRounded(s)
	}
	// Reservations settle within two heartbeats: poll until statfs
	// counts the tree's pages (two replicas) and no more.
	var st syscall.Statfs_t
	testkit.AwaitCond(t, 60*time.Second, "statfs through the mount counting the tree's pages", func() bool {
		if err := syscall.Statfs(m.Dir, &st); err != nil {
			t.Fatal(err)
		}
		used := int64(st.Blocks-st.Bfree) * st.Bsize
		return used >= 2*pages && used <= 2*pages+2*st.Bsize
	})
	if total := int64(st.Blocks) * st.Bsize; total > 2*size || total < 2*size-2*st.Bsize {
		t.Errorf("statfs through the mount: %d bytes in all, want the volumes' %d", total, 2*size)
	}
}
