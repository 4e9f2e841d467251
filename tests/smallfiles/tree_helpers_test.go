package smallfiles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// sourceLikeSizes returns n file sizes shaped like a source tree's: nine
// in ten between 1 and 30 KiB (log-uniform, so most are small), the rest
// larger up to 200 KiB, a few under 1 KiB.
func sourceLikeSizes(n int, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 21))
	logUniform := func(lo, hi float64) int {
		return int(math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))))
	}
	out := make([]int, n)
	for i := range out {
		switch p := r.Float64(); {
		case p < 0.03:
			out[i] = 1 + r.IntN(1023)
		case p < 0.93:
			out[i] = logUniform(1<<10, 30<<10)
		default:
			out[i] = logUniform(30<<10, 200<<10)
		}
	}
	return out
}

// tree is a set of files by path, with their contents' seeds and sizes.
type tree struct {
	paths []string
	sizes []int
	seed  uint64
}

func newTree(root string, n, perDir int, seed uint64) *tree {
	t := &tree{sizes: sourceLikeSizes(n, seed), seed: seed}
	for i := range n {
		t.paths = append(t.paths, fmt.Sprintf("%s/d%03d/f%05d.go", root, i/perDir, i))
	}
	return t
}

// upTo keeps the tree's first files that hold at most pages bytes in whole
// pages, and returns those bytes.
func (t *tree) upTo(pages int64) int64 {
	var sum int64
	for i, s := range t.sizes {
		if sum+pageRounded(s) > pages {
			t.paths, t.sizes = t.paths[:i], t.sizes[:i]
			break
		}
		sum += pageRounded(s)
	}
	return sum
}

func (t *tree) content(i int) []byte { return testkit.SeededBytes(t.sizes[i], t.seed<<20+uint64(i)) }

// bytes is the sum of the files' sizes.
func (t *tree) bytes() int64 {
	var sum int64
	for _, s := range t.sizes {
		sum += int64(s)
	}
	return sum
}

// dirs returns the tree's directories.
func (t *tree) dirs() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range t.paths {
		if d := filepath.Dir(p); !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// write writes files lo..hi-1 of the tree with rep replicas, batch files
// per transaction, by workers in parallel (each its own directories, so
// they never conflict). It returns the first error and how many files
// were committed before it (all, if none).
func (t *tree) write(ctx context.Context, cl *client.Client, rep, workers, batch int) (int, error) {
	for _, d := range t.dirs() {
		if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			_, err := tx.MkdirAll(ctx, d, 0o755)
			return err
		}); err != nil {
			return 0, fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	byDir := map[string][]int{}
	for i, p := range t.paths {
		byDir[filepath.Dir(p)] = append(byDir[filepath.Dir(p)], i)
	}
	jobs := make(chan []int)
	var mu sync.Mutex
	var first error
	done := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for idx := range jobs {
				err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
					for _, i := range idx {
						f, err := tx.CreateFile(ctx, t.paths[i], client.CreateOptions{Rep: rep})
						if err != nil {
							return err
						}
						if _, err := f.Write(t.content(i)); err != nil {
							return fmt.Errorf("%s: %w", t.paths[i], err)
						}
					}
					return nil
				})
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					done += len(idx)
				}
				mu.Unlock()
			}
		}()
	}
	for _, d := range t.dirs() {
		idx := byDir[d]
		for len(idx) > 0 {
			mu.Lock()
			stop := first != nil
			mu.Unlock()
			if stop {
				break
			}
			k := min(batch, len(idx))
			jobs <- idx[:k]
			idx = idx[k:]
		}
	}
	close(jobs)
	wg.Wait()
	return done, first
}

// check reads every file of the tree back and fails the test on the first
// that differs.
func (t *tree) check(tt *testing.T, ctx context.Context, cl *client.Client, workers int) {
	tt.Helper()
	byDir := map[string][]int{}
	for i, p := range t.paths {
		byDir[filepath.Dir(p)] = append(byDir[filepath.Dir(p)], i)
	}
	jobs := make(chan []int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for idx := range jobs {
				if first != nil {
					continue
				}
				first = cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
					var buf bytes.Buffer
					for _, i := range idx {
						f, err := tx.Open(ctx, t.paths[i])
						if err != nil {
							return fmt.Errorf("open %s: %w", t.paths[i], err)
						}
						buf.Reset()
						if _, err := buf.ReadFrom(f); err != nil {
							return fmt.Errorf("read %s: %w", t.paths[i], err)
						}
						if want := t.content(i); !bytes.Equal(buf.Bytes(), want) {
							return fmt.Errorf("%s reads back as %d bytes (%d differ), want %d", t.paths[i], buf.Len(), testkit.CountDiff(buf.Bytes(), want), len(want))
						}
					}
					return nil
				})
			}
			errs <- first
		}()
	}
	for _, idx := range byDir {
		jobs <- idx
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			tt.Fatal(err)
		}
	}
}

// pageRounded is what n bytes take in whole 4 KiB pages.
func pageRounded(n int) int64 { return int64((n + 4095) / 4096 * 4096) }

// dfJSON is 'plasma df -json'.
type dfJSON struct {
	Size      int64 `json:"size"`
	Used      int64 `json:"used"`
	Available int64 `json:"available"`
	Percent   int   `json:"use_percent"`
}

func df(t *testing.T, c *clustertest.Procs) dfJSON {
	t.Helper()
	out, code := c.Run(nil, "df", "-json")
	if code != 0 {
		t.Fatalf("plasma df: exit %d: %s", code, out)
	}
	var v dfJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("plasma df -json: %v\n%s", err, out)
	}
	return v
}

// diskBytes is the space a file takes on the host's disk.
func diskBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// volumeEntries is the size of a volume's entry region (16 bytes a slot),
// from its config.
func volumeEntries(t *testing.T, dir string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Blocks int64 `json:"blocks"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Blocks * 16
}

func isNoSpace(err error) bool { return errors.Is(err, client.ErrNoSpace) }
