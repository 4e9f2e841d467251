package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// target is where metadata operations go: the native API or a local
// directory (the local filesystem, or later a FUSE mount).
type target interface {
	Name() string
	Mkdir(p string) error
	Create(p string) error
	Stat(p string) error
	Utime(p string) error
	Unlink(p string) error
	Rmdir(p string) error
	Close() error
}

// nativeTarget runs each operation as its own committed transaction: one
// compound request (the change and its commit), durable or async.
type nativeTarget struct {
	ctx  context.Context
	c    *client.Client
	root string
	d    clientx.Durability
	mu   sync.Mutex
	inos map[string]uint64 // files this target created (utime by inode)
}

func newNative(ctx context.Context, cfg client.Config, root string, d clientx.Durability) (target, error) {
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &nativeTarget{ctx: ctx, c: c, root: root, d: d, inos: map[string]uint64{}}, nil
}

func (t *nativeTarget) Name() string { return "plasma native API" }
func (t *nativeTarget) p(s string) string {
	return t.root + "/" + s
}
func (t *nativeTarget) do(fn func(ctx context.Context, tx *client.Txn) error) error {
	return t.c.Txn(t.ctx, fn)
}
func (t *nativeTarget) Mkdir(p string) error {
	_, err := clientx.Auto(t.c, t.d).Mkdir(t.ctx, t.p(p), 0)
	return err
}
func (t *nativeTarget) Create(p string) error {
	fi, err := clientx.Auto(t.c, t.d).Create(t.ctx, t.p(p), client.CreateOptions{})
	if err == nil {
		t.mu.Lock()
		t.inos[p] = fi.Ino
		t.mu.Unlock()
	}
	return err
}
func (t *nativeTarget) Stat(p string) error {
	_, err := t.c.Lookup(t.ctx, t.p(p))
	return err
}
func (t *nativeTarget) Utime(p string) error {
	t.mu.Lock()
	ino := t.inos[p]
	t.mu.Unlock()
	if ino == 0 { // not created here: find it first
		fi, err := t.c.Lookup(t.ctx, t.p(p))
		if err != nil {
			return err
		}
		ino = fi.Ino
	}
	now := time.Now()
	_, err := clientx.Auto(t.c, t.d).SetAttr(t.ctx, ino, client.SetAttr{Mtime: &now})
	return err
}
func (t *nativeTarget) Unlink(p string) error { return clientx.Auto(t.c, t.d).Unlink(t.ctx, t.p(p)) }
func (t *nativeTarget) Rmdir(p string) error  { return clientx.Auto(t.c, t.d).Rmdir(t.ctx, t.p(p)) }
func (t *nativeTarget) Close() error          { return t.c.Close() }

// localTarget works on a directory of the local filesystem.
type localTarget struct{ root string }

func (t localTarget) Name() string          { return "directory " + t.root }
func (t localTarget) p(s string) string     { return filepath.Join(t.root, s) }
func (t localTarget) Mkdir(p string) error  { return os.Mkdir(t.p(p), 0o755) }
func (t localTarget) Stat(p string) error   { _, err := os.Stat(t.p(p)); return err }
func (t localTarget) Unlink(p string) error { return os.Remove(t.p(p)) }
func (t localTarget) Rmdir(p string) error  { return os.Remove(t.p(p)) }
func (t localTarget) Close() error          { return nil }
func (t localTarget) Create(p string) error {
	f, err := os.Create(t.p(p))
	if err != nil {
		return err
	}
	return f.Close()
}
func (t localTarget) Utime(p string) error {
	now := time.Now()
	return os.Chtimes(t.p(p), now, now)
}

func durability(async bool) clientx.Durability {
	if async {
		return clientx.Async
	}
	return clientx.Durable
}

// MetaratesOptions configure metarates (seed 004).
type MetaratesOptions struct {
	NP        []int  // process counts
	N         int    // files per process
	SharedDir bool   // all processes in one directory
	Target    string // "native" or a local directory path
	Async     bool   // native: async commits (default durable)
	Root      string // PlasmaFS directory for the native target
}

type phase struct {
	name string
	op   func(t target, p string) error
}

var metaPhases = []phase{
	{"create/close", func(t target, p string) error { return t.Create(p) }},
	{"stat", func(t target, p string) error { return t.Stat(p) }},
	{"utime", func(t target, p string) error { return t.Utime(p) }},
	{"unlink", func(t target, p string) error { return t.Unlink(p) }},
}

// Metarates runs create/close, stat, utime and unlink with NP concurrent
// workers (each its own connection) against the target, and reports
// per-process and total rates plus the scaling efficiency.
func Metarates(ctx context.Context, cfg client.Config, o MetaratesOptions) (*Report, error) {
	rep := &Report{Bench: "metarates", Started: time.Now(), Params: fmt.Sprintf("np=%v n=%d shared=%v target=%s", o.NP, o.N, o.SharedDir, o.Target)}
	mk := func() (target, error) {
		if o.Target == "native" {
			return newNative(ctx, cfg, o.Root, durability(o.Async))
		}
		return localTarget{o.Target}, nil
	}
	setup, err := mk()
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	run := fmt.Sprintf("metarates-%d", time.Now().UnixNano())
	if o.Target == "native" {
		if err := setup.(*nativeTarget).do(func(ctx context.Context, tx *client.Txn) error {
			_, err := tx.MkdirAll(ctx, o.Root+"/"+run, 0)
			return err
		}); err != nil {
			return nil, err
		}
	} else if err := setup.Mkdir(run); err != nil {
		return nil, err
	}
	totals := map[string]map[int]float64{}
	for _, np := range o.NP {
		dirs := make([]string, np)
		for w := range dirs {
			dirs[w] = fmt.Sprintf("%s/np%d", run, np)
			if !o.SharedDir {
				dirs[w] = fmt.Sprintf("%s/np%d-w%d", run, np, w)
			}
			if w == 0 || !o.SharedDir {
				if err := setup.Mkdir(dirs[w]); err != nil {
					return nil, err
				}
			}
		}
		ts := make([]target, np)
		for w := range ts {
			if ts[w], err = mk(); err != nil {
				return nil, err
			}
			defer ts[w].Close()
		}
		for _, ph := range metaPhases {
			per := make([]float64, np)
			var wg sync.WaitGroup
			errs := make(chan error, np)
			start := time.Now()
			for w := 0; w < np; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					t0 := time.Now()
					for i := 0; i < o.N; i++ {
						if err := ph.op(ts[w], fmt.Sprintf("%s/f-%d-%d", dirs[w], w, i)); err != nil {
							errs <- fmt.Errorf("%s: %w", ph.name, err)
							return
						}
					}
					per[w] = float64(o.N) / time.Since(t0).Seconds()
				}()
			}
			wg.Wait()
			close(errs)
			if err := <-errs; err != nil {
				return nil, err
			}
			total := float64(np*o.N) / time.Since(start).Seconds()
			if totals[ph.name] == nil {
				totals[ph.name] = map[int]float64{}
			}
			totals[ph.name][np] = total
			rep.add(Result{Name: fmt.Sprintf("%s NP=%d total", ph.name, np), Unit: "ops/s", Ours: total})
			rep.add(Result{Name: fmt.Sprintf("%s NP=%d per process", ph.name, np), Unit: "ops/s", Ours: median(per)})
		}
	}
	for _, ph := range metaPhases {
		base := totals[ph.name][o.NP[0]]
		var parts []string
		for _, np := range o.NP {
			parts = append(parts, fmt.Sprintf("NP=%d: %.2f", np, totals[ph.name][np]/base))
		}
		rep.add(Result{Name: ph.name + " efficiency (total ÷ NP=" + fmt.Sprint(o.NP[0]) + ")", Unit: "", Ours: totals[ph.name][o.NP[len(o.NP)-1]] / base, Note: strings.Join(parts, ", ")})
	}
	for i := range rep.Results {
		rep.Results[i].RefName = setup.Name()
	}
	return rep, nil
}

// FdtreeOptions configure fdtree (seed 004).
type FdtreeOptions struct {
	Levels, Dirs, Files int
	Target              string
	Root                string
	Async               bool // native: async commits (default durable)
}

// Fdtree creates a directory tree (Dirs subdirectories per level, Levels
// deep, Files files in each directory) and removes it again, reporting
// directories and files per second for each phase.
func Fdtree(ctx context.Context, cfg client.Config, o FdtreeOptions) (*Report, error) {
	rep := &Report{Bench: "fdtree", Started: time.Now(), Params: fmt.Sprintf("levels=%d dirs=%d files=%d target=%s", o.Levels, o.Dirs, o.Files, o.Target)}
	var t target
	var err error
	if o.Target == "native" {
		if t, err = newNative(ctx, cfg, o.Root, durability(o.Async)); err != nil {
			return nil, err
		}
		if err := t.(*nativeTarget).do(func(ctx context.Context, tx *client.Txn) error { _, err := tx.MkdirAll(ctx, o.Root, 0); return err }); err != nil {
			return nil, err
		}
	} else {
		t = localTarget{o.Target}
	}
	defer t.Close()
	top := fmt.Sprintf("fdtree-%d", time.Now().UnixNano())
	var dirs, files []string
	var walk func(p string, level int)
	walk = func(p string, level int) {
		dirs = append(dirs, p)
		for f := 0; f < o.Files; f++ {
			files = append(files, fmt.Sprintf("%s/f%d", p, f))
		}
		if level == o.Levels {
			return
		}
		for d := 0; d < o.Dirs; d++ {
			walk(fmt.Sprintf("%s/d%d", p, d), level+1)
		}
	}
	walk(top, 0)
	reversed := make([]string, len(dirs))
	for i, p := range dirs {
		reversed[len(dirs)-1-i] = p // children before parents
	}
	for _, ph := range []struct {
		name, unit string
		paths      []string
		op         func(string) error
	}{
		{"directory creates", "dirs/s", dirs, t.Mkdir},
		{"file creates", "files/s", files, t.Create},
		{"file removals", "files/s", files, t.Unlink},
		{"directory removals", "dirs/s", reversed, t.Rmdir},
	} {
		d, err := timeIt(func() error {
			for _, p := range ph.paths {
				if err := ph.op(p); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ph.name, err)
		}
		rep.add(Result{Name: ph.name, Unit: ph.unit, Ours: float64(len(ph.paths)) / d.Seconds()})
	}
	for i := range rep.Results {
		rep.Results[i].RefName = t.Name()
	}
	return rep, nil
}
