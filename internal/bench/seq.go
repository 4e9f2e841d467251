package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/plasmafs/plasma/client"
)

// SeqOptions configure the sequential benchmark (seed 000, test 1).
type SeqOptions struct {
	Size     int64  // file size
	LocalDir string // where the local reference files go (same disk as the datanodes)
	Runs     int    // repetitions; medians are reported
	Reps     []int  // replication factors to measure
}

// Seq measures put, get and cat of a large file with each replication,
// beside writing the same file locally with fsync and reading it locally.
func Seq(ctx context.Context, c *client.Client, o SeqOptions) (*Report, error) {
	rep := &Report{Bench: "seq", Started: time.Now(), Params: fmt.Sprintf("size=%d runs=%d localdir=%s", o.Size, o.Runs, o.LocalDir)}
	src := filepath.Join(o.LocalDir, "plasma-bench-src")
	if err := makeRandomFile(src, o.Size); err != nil {
		return nil, err
	}
	defer os.Remove(src)
	copyPath := filepath.Join(o.LocalDir, "plasma-bench-copy")
	defer os.Remove(copyPath)
	pairs := newPairedRates(o.Size)
	localWrite := func() error { return localCopy(src, copyPath, true) }
	localCp := func() error { return localCopy(src, copyPath, false) }
	localRead := func() error { return readAll(copyPath) }
	for run := 0; run < o.Runs; run++ {
		for _, r := range o.Reps {
			name := fmt.Sprintf("/plasma-bench-seq-rep%d", r)
			removeIfExists(ctx, c, name)
			put := func() error {
				f, err := os.Open(src)
				if err != nil {
					return err
				}
				defer f.Close()
				_, err = c.CopyIn(ctx, f, name, client.CopyOptions{Rep: r, CommitEvery: 1 << 30})
				return err
			}
			get := func() error {
				lf, err := os.Create(copyPath)
				if err != nil {
					return err
				}
				defer lf.Close()
				return getTo(ctx, c, name, lf)
			}
			cat := func() error { return getTo(ctx, c, name, io.Discard) }
			if err := pairs.run(fmt.Sprintf("put rep %d", r), localWrite, put); err != nil {
				return nil, err
			}
			if err := pairs.run(fmt.Sprintf("get rep %d", r), localCp, get); err != nil {
				return nil, err
			}
			if err := pairs.run(fmt.Sprintf("cat rep %d", r), localRead, cat); err != nil {
				return nil, err
			}
		}
	}
	seeds := map[int][3]string{1: {"69 MB/s (dd 140)", "103 MB/s", "91 MB/s"}, 2: {"45 MB/s (dd 140)", "104 MB/s", "141 MB/s"}}
	refNames := [3]string{"local write+fsync", "local copy", "local read"}
	for _, r := range o.Reps {
		for i, what := range []string{"put", "get", "cat"} {
			key := fmt.Sprintf("%s rep %d", what, r)
			pairs.add(rep, key, Result{Name: key, RefName: refNames[i], Seed: seeds[r][i],
				Note: fmt.Sprintf("ratio is the median of per-pair ratios; medians alone give %.2f", pairs.mediansRatio(key))})
		}
	}
	for _, r := range o.Reps {
		xs, err := blockRuns(ctx, c, fmt.Sprintf("/plasma-bench-seq-rep%d", r))
		if err == nil {
			rep.add(Result{Name: fmt.Sprintf("block runs rep %d", r), Unit: "extents", Ours: float64(len(xs)), Note: runSummary(xs)})
		}
	}
	return rep, nil
}

func timeIt(fn func() error) (time.Duration, error) {
	t := time.Now()
	err := fn()
	return time.Since(t), err
}

func makeRandomFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	if _, err := io.CopyN(w, rand.Reader, size); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Sync()
}

func localCopy(src, dst string, sync bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, buf); err != nil {
		return err
	}
	if sync {
		return out.Sync()
	}
	return nil
}

func readAll(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
	return err
}

// putFile copies the local file src to name in PlasmaFS as plasma put
// does, committing once at the end.
func putFile(ctx context.Context, c *client.Client, src, name string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = c.CopyIn(ctx, f, name, client.CopyOptions{CommitEvery: 1 << 30})
	return err
}

func getTo(ctx context.Context, c *client.Client, name string, w io.Writer) error {
	tx := c.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, name)
	if err != nil {
		return err
	}
	_, err = f.WriteTo(w)
	return err
}

func removeIfExists(ctx context.Context, c *client.Client, name string) {
	c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		if err := tx.Unlink(ctx, name); err != nil && !isNotFound(err) {
			return err
		}
		return nil
	})
}

func blockRuns(ctx context.Context, c *client.Client, name string) ([]client.Extent, error) {
	tx := c.Begin()
	defer tx.Abort(ctx)
	fi, err := tx.Lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	return tx.Blocks(ctx, fi.Ino)
}

func runSummary(xs []client.Extent) string {
	per := map[string]int{}
	minRun, maxRun := 0, 0
	for i, x := range xs {
		for _, r := range x.Replicas {
			per[r.Datanode[:min(8, len(r.Datanode))]] += x.Count
		}
		if i == 0 || x.Count < minRun {
			minRun = x.Count
		}
		if x.Count > maxRun {
			maxRun = x.Count
		}
	}
	return fmt.Sprintf("run length %d..%d blocks; blocks per datanode %v", minRun, maxRun, per)
}
