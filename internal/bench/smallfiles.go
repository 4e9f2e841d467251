package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plasmafs/plasma/client"
)

// SmallFilesOptions configure the small-files benchmark (issue 21).
type SmallFilesOptions struct {
	Plasma string // the plasma binary that runs the clusters
	// Dir holds the clusters and the reference trees (removed after):
	// a directory on the journaled ext4 image the figures are about.
	Dir    string
	Files  int    // files of the synthetic source-like tree
	GoSrc  string // a real source tree to store too ("": none)
	Size   int64  // the large file of put and get
	Runs   int    // put/get repetitions per layout (medians reported)
	Volume int64  // each cluster's datanode volume
}

// SmallFiles measures what trees of small files cost a sparse datanode
// volume (the bytes its data file takes on disk, per replica) beside
// ext4's du of the same tree written on the same filesystem, and put and
// get of a large file on a cluster of sparse volumes beside one of fixed
// slots (the layout before sparse volumes, preallocated with zeros as
// 'datanode init' did by default), runs alternating between them.
func SmallFiles(ctx context.Context, o SmallFilesOptions) (*Report, error) {
	rep := &Report{Bench: "smallfiles", Started: time.Now(),
		Params: fmt.Sprintf("dir=%s files=%d gosrc=%s size=%d runs=%d volume=%d", o.Dir, o.Files, o.GoSrc, o.Size, o.Runs, o.Volume)}
	dir, err := os.MkdirTemp(o.Dir, "plasma-bench-smallfiles-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sparse, err := startSpaceCluster(ctx, o.Plasma, filepath.Join(dir, "sparse"), "sparse", o.Volume)
	if err != nil {
		return nil, err
	}
	defer sparse.stop()
	trees := []struct{ name, src string }{{fmt.Sprintf("synthetic tree of %d source-like files", o.Files), ""}}
	if o.GoSrc != "" {
		trees = append(trees, struct{ name, src string }{"Go's source tree (" + o.GoSrc + ")", o.GoSrc})
	}
	for i, tr := range trees {
		files, err := treeFiles(tr.src, o.Files)
		if err != nil {
			return nil, err
		}
		var content, blocks int64
		for _, f := range files {
			content += int64(len(f.data))
			blocks += (int64(len(f.data)) + 1<<20 - 1) >> 20
		}
		ref := filepath.Join(dir, fmt.Sprintf("ref%d", i))
		if err := writeTreeLocal(ref, files); err != nil {
			return nil, err
		}
		du, err := duBytes(ref)
		if err != nil {
			return nil, err
		}
		os.RemoveAll(ref)
		before, err := diskUse(sparse.data)
		if err != nil {
			return nil, err
		}
		if err := writeTreePlasma(ctx, sparse.c, fmt.Sprintf("/tree%d", i), files); err != nil {
			return nil, fmt.Errorf("%s: %w", tr.name, err)
		}
		if err := sparse.c.Sync(ctx); err != nil {
			return nil, err
		}
		after, err := diskUse(sparse.data)
		if err != nil {
			return nil, err
		}
		used := after - before
		rep.add(Result{Name: "space of the " + tr.name, Unit: "MiB", Ours: float64(used) / (1 << 20), RefName: "ext4 du of the same tree", Ref: float64(du) / (1 << 20),
			Note: fmt.Sprintf("%d files, %.1f MiB of content; ratio = sparse volume / du, goal ≤ 1.5; fixed slots would take %d blocks = %.0fx du",
				len(files), float64(content)/(1<<20), blocks, float64(blocks<<20)/float64(du))})
		// A ratio where lower is better: the table shows ours / ref.
	}
	sparse.stop()
	os.RemoveAll(filepath.Join(dir, "sparse"))

	fixed, err := startSpaceCluster(ctx, o.Plasma, filepath.Join(dir, "fixed"), "fixed", o.Volume)
	if err != nil {
		return nil, err
	}
	defer fixed.stop()
	if sparse, err = startSpaceCluster(ctx, o.Plasma, filepath.Join(dir, "sparse2"), "sparse", o.Volume); err != nil {
		return nil, err
	}
	defer sparse.stop()
	src := filepath.Join(dir, "large")
	if err := makeRandomFile(src, o.Size); err != nil {
		return nil, err
	}
	pairs := newPairedRates(o.Size)
	put := func(c *client.Client) func() error {
		return func() error {
			f, err := os.Open(src)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = c.CopyIn(ctx, f, "/large", client.CopyOptions{Rep: 1, CommitEvery: 1 << 30})
			return err
		}
	}
	get := func(c *client.Client) func() error {
		return func() error { return getTo(ctx, c, "/large", io.Discard) }
	}
	for run := 0; run < o.Runs; run++ {
		odd := run%2 == 1
		// The last run's file goes before the timing, and the sparse
		// datanode releases its blocks (punches them out) first: what
		// is timed is the write itself on both sides.
		for _, sc := range []*spaceCluster{fixed, sparse} {
			removeIfExists(ctx, sc.c, "/large")
			if err := sc.waitEmpty(ctx); err != nil {
				return nil, err
			}
		}
		if err := pairs.runOrdered("put", odd, put(fixed.c), put(sparse.c)); err != nil {
			return nil, err
		}
		if err := pairs.runOrdered("get", odd, get(fixed.c), get(sparse.c)); err != nil {
			return nil, err
		}
		// The same put with neither data file in the page cache: a
		// volume of fixed slots smaller than the memory keeps its slots
		// cached, so the put above overwrites cached pages there while
		// the sparse volume writes new ones (its allocator moves on to
		// slots never written, and released slots are punched). A
		// volume larger than the memory is not cached either way.
		for _, sc := range []*spaceCluster{fixed, sparse} {
			removeIfExists(ctx, sc.c, "/large")
			if err := sc.waitEmpty(ctx); err != nil {
				return nil, err
			}
			if err := dropCache(sc.data); err != nil {
				return nil, err
			}
		}
		if err := pairs.runOrdered(coldPut, odd, put(fixed.c), put(sparse.c)); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{"put", "get", coldPut} {
		pairs.add(rep, k, Result{Name: k + " of a large file, sparse volume", RefName: "the same on a volume of fixed slots",
			Note: fmt.Sprintf("%d MiB, replication 1; goal ratio ≥ 0.95 (median of per-pair ratios; medians alone give %.2f)", o.Size>>20, pairs.mediansRatio(k))})
	}
	return rep, nil
}

// coldPut names the put timed with neither volume's data file cached.
const coldPut = "put (volumes not cached)"

// spaceCluster is a namenode and one datanode of the benchmark's own, at
// security level none.
type spaceCluster struct {
	nn   *benchNamenode
	c    *client.Client
	data string // the datanode volume's data file
}

// startSpaceCluster starts a namenode and a datanode on a new volume of
// layout (sparse or fixed, zero-filled) in dir.
func startSpaceCluster(ctx context.Context, plasma, dir, layout string, volume int64) (*spaceCluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	sc := &spaceCluster{nn: &benchNamenode{cfg: client.Config{Namenodes: []string{addr}, Security: "none", DataSecurity: "none"}}}
	logf, err := os.Create(filepath.Join(dir, "cluster.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	vol := filepath.Join(dir, "vol")
	sc.data = filepath.Join(vol, "data")
	if out, err := exec.Command(plasma, "datanode", "init", "-layout", layout, "-dir", vol, "-cluster", benchCluster, "-blocksize", benchBlocksize,
		"-size", strconv.FormatInt(volume, 10)).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("datanode init -layout %s: %v: %s", layout, err, out)
	}
	sc.nn.cmd = exec.Command(plasma, "namenode", "-listen", addr, "-db", filepath.Join(dir, "namenode.db"), "-format", "-security", "none", "-log-level", "warn",
		"-cluster", benchCluster, "-blocksize", benchBlocksize)
	sc.nn.cmd.Stdout, sc.nn.cmd.Stderr = logf, logf
	if err := sc.nn.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the namenode (-plasma %s): %w", plasma, err)
	}
	dnAddr, err := freeLoopback()
	if err != nil {
		sc.stop()
		return nil, err
	}
	sc.nn.dn = exec.Command(plasma, "datanode", "-dir", vol, "-listen", dnAddr, "-namenode", addr, "-security", "none", "-namenode-security", "none", "-log-level", "warn")
	sc.nn.dn.Stdout, sc.nn.dn.Stderr = logf, logf
	if err := sc.nn.dn.Start(); err != nil {
		sc.stop()
		return nil, fmt.Errorf("start the datanode: %w", err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		c, err := client.New(ctx, sc.nn.cfg)
		if err == nil {
			st, err := c.FsStat(ctx)
			if err == nil && st.LiveDatanodes == 1 {
				sc.c = c
				return sc, nil
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			sc.stop()
			log, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("the %s cluster in %s does not answer with its datanode live after 60 s (%v):\n%s", layout, dir, err, log)
		}
		time.Sleep(20 * time.Millisecond) // waiting for processes to listen
	}
}

// waitEmpty waits until the datanode reports no blocks in use (freed
// blocks released).
func (sc *spaceCluster) waitEmpty(ctx context.Context) error {
	for deadline := time.Now().Add(2 * time.Minute); ; {
		st, err := sc.c.FsStat(ctx)
		if err != nil {
			return err
		}
		if st.UsedBlocks == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d blocks still in use 2 minutes after the last file was removed", st.UsedBlocks)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
}

func (sc *spaceCluster) stop() {
	if sc.c != nil {
		sc.c.Close()
		sc.c = nil
	}
	sc.nn.stop()
}

// treeFile is one file of a tree: its path relative to the root, its data.
type treeFile struct {
	path string
	data []byte
}

// treeFiles returns the regular files under src, or, for src "", n
// synthetic files of source-like sizes (nine in ten 1-30 KiB,
// log-uniform; the rest up to 200 KiB; a few under 1 KiB), 200 per
// directory.
func treeFiles(src string, n int) ([]treeFile, error) {
	var out []treeFile
	if src == "" {
		r := rand.New(rand.NewPCG(21, 21))
		logUniform := func(lo, hi float64) int {
			return int(math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo))))
		}
		for i := range n {
			size := 0
			switch p := r.Float64(); {
			case p < 0.03:
				size = 1 + r.IntN(1023)
			case p < 0.93:
				size = logUniform(1<<10, 30<<10)
			default:
				size = logUniform(30<<10, 200<<10)
			}
			data := make([]byte, size)
			for j := range data {
				data[j] = byte(r.Uint32())
			}
			out = append(out, treeFile{fmt.Sprintf("d%03d/f%05d.go", i/200, i), data})
		}
		return out, nil
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out = append(out, treeFile{rel, b})
		return nil
	})
	return out, err
}

func writeTreeLocal(root string, files []treeFile) error {
	for _, f := range files {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeTreePlasma writes files under root, a directory's files per
// transaction (commits of up to 100 files).
func writeTreePlasma(ctx context.Context, c *client.Client, root string, files []treeFile) error {
	for i := 0; i < len(files); {
		j := min(i+100, len(files))
		if err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for _, f := range files[i:j] {
				p := root + "/" + filepath.ToSlash(f.path)
				if _, err := tx.MkdirAll(ctx, pathDir(p), 0o755); err != nil {
					return err
				}
				w, err := tx.CreateFile(ctx, p, client.CreateOptions{Rep: 1})
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				if _, err := io.Copy(w, bytes.NewReader(f.data)); err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func pathDir(p string) string { return p[:strings.LastIndexByte(p, '/')] }

// duBytes is du -s -B1 of dir (what ext4 spends on it, directories
// included).
func duBytes(dir string) (int64, error) {
	if err := exec.Command("sync", "-f", dir).Run(); err != nil {
		return 0, fmt.Errorf("sync -f %s: %w", dir, err)
	}
	out, err := exec.Command("du", "-s", "-B1", dir).Output()
	if err != nil {
		return 0, fmt.Errorf("du %s: %w", dir, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return 0, fmt.Errorf("du %s: no output", dir)
	}
	return strconv.ParseInt(fields[0], 10, 64)
}

// diskUse is what a file takes on disk.
func diskUse(path string) (int64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Blocks * 512, nil
}
