package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// RandomOptions configure the random-read benchmark (seed 000 test 3,
// the original's ps_random).
type RandomOptions struct {
	N        int    // blocks to read
	File     string // PlasmaFS file
	LocalDir string // where the local reference copy goes
	Cold     bool   // also measure with caches dropped (needs root)
}

// Random reads N random whole blocks of File, after loading its block
// list, and counts the namenode requests made while reading; the
// reference reads the same pattern from a local copy of the file.
func Random(ctx context.Context, c *client.Client, o RandomOptions) (*Report, error) {
	rep := &Report{Bench: "random", Started: time.Now(), Params: fmt.Sprintf("n=%d file=%s", o.N, o.File)}
	tx := c.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, o.File)
	if err != nil {
		return nil, err
	}
	fi, err := tx.StatInode(ctx, f.Ino())
	if err != nil {
		return nil, err
	}
	bs := int64(fi.Blocksize)
	nblocks := f.Size() / bs
	if nblocks == 0 {
		return nil, fmt.Errorf("%s is smaller than one block", o.File)
	}
	local := filepath.Join(o.LocalDir, "plasma-bench-random-copy")
	lf, err := os.Create(local)
	if err != nil {
		return nil, err
	}
	defer os.Remove(local)
	if _, err := f.WriteTo(lf); err != nil {
		lf.Close()
		return nil, err
	}
	lf.Sync()
	rng := rand.New(rand.NewPCG(7, 7))
	order := make([]int64, o.N)
	for i := range order {
		order[i] = rng.Int64N(nblocks)
	}
	buf := make([]byte, bs)
	one := make([]byte, 1)
	f.ReadAt(one, 0) // loads the block list
	modes := []bool{false}
	if o.Cold {
		modes = append(modes, true)
	}
	for _, cold := range modes {
		label := "warm"
		if cold {
			label = "cold"
			if err := dropCaches(); err != nil {
				rep.add(Result{Name: "random reads cold", Note: "skipped: " + err.Error()})
				continue
			}
		}
		before := clientx.NamenodeRequests(c)
		d, err := timeIt(func() error {
			for _, b := range order {
				if _, err := f.ReadAt(buf, b*bs); err != nil && err != io.EOF {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		nnReqs := clientx.NamenodeRequests(c) - before
		if cold {
			dropCaches()
		}
		lfr, err := os.Open(local)
		if err != nil {
			return nil, err
		}
		dl, err := timeIt(func() error {
			for _, b := range order {
				if _, err := lfr.ReadAt(buf, b*bs); err != nil && err != io.EOF {
					return err
				}
			}
			return nil
		})
		lfr.Close()
		if err != nil {
			return nil, err
		}
		total := int64(o.N) * bs
		rep.add(Result{Name: "random block reads " + label, Unit: "MB/s", Ours: mbps(total, d), RefName: "local random reads, same pattern", Ref: mbps(total, dl), Seed: "38.5 MB/s"})
		rep.add(Result{Name: "namenode requests during reads " + label, Unit: "requests", Ours: float64(nnReqs), Seed: "\"only a few\""})
	}
	return rep, nil
}

// dropCaches empties the page cache (root only) so reads hit the disk.
func dropCaches() error {
	syncAll()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
}

// ParallelCat runs p concurrent readers (own connection each) of one file
// and compares the total with a single reader (seed 000 test 2).
func ParallelCat(ctx context.Context, cfg client.Config, file string, p int) (*Report, error) {
	rep := &Report{Bench: "parallel-cat", Started: time.Now(), Params: fmt.Sprintf("P=%d file=%s", p, file)}
	catOnce := func() (int64, error) {
		c, err := client.New(ctx, cfg)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		tx := c.Begin()
		defer tx.Abort(ctx)
		f, err := tx.Open(ctx, file)
		if err != nil {
			return 0, err
		}
		return f.WriteTo(io.Discard)
	}
	var n int64
	d1, err := timeIt(func() error { var err error; n, err = catOnce(); return err })
	if err != nil {
		return nil, err
	}
	single := mbps(n, d1)
	var wg sync.WaitGroup
	errs := make(chan error, p)
	per := make([]float64, p)
	start := time.Now()
	for i := 0; i < p; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			m, err := catOnce()
			if err != nil {
				errs <- err
				return
			}
			per[i] = mbps(m, time.Since(t))
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	total := mbps(n*int64(p), time.Since(start))
	rep.add(Result{Name: fmt.Sprintf("%d parallel cats, total", p), Unit: "MB/s", Ours: total, RefName: "one cat alone", Ref: single, Seed: "111.6 MB/s total (4 cats)"})
	rep.add(Result{Name: fmt.Sprintf("%d parallel cats, per reader (median)", p), Unit: "MB/s", Ours: median(per), Seed: "27.9 MB/s"})
	return rep, nil
}
