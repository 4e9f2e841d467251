package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/bench"
)

func init() {
	register("bench", "seq|lookup|create|random|parallel-cat|metarates|fdtree|append|mount-seq|security|kv|mr|build|nfs [options]", "reproduce the seed benchmarks beside their references", cmdBench)
}

// benchmarks describes each benchmark for 'plasma bench -help'.
var benchmarks = [][2]string{
	{"seq", "put, get and cat of a large file per replication beside the same file written (with fsync) and read locally"},
	{"lookup", "synchronous inode lookups through the namenode beside a raw TCP ping-pong and an empty RPC"},
	{"create", "create+commit of empty files, -mode durable|async, beside a create-shaped SQLite commit, an O_DSYNC append and a TCP ping-pong"},
	{"random", "random whole-block reads (counting namenode requests) beside the same reads of a local copy"},
	{"parallel-cat", "P concurrent readers of one file beside a single reader"},
	{"metarates", "create/stat/utime per process (seed 004) through the API or a mounted directory (-target)"},
	{"fdtree", "a deep directory tree created and removed (seed 004)"},
	{"append", "small appends each followed by fsync, through a mount (-target), beside a local directory (-ref)"},
	{"mount-seq", "a large file written and read through the FUSE mount beside put and get"},
	{"security", "what each security level costs: stat round trips and block reads beside a plain cluster"},
	{"kv", "Plasma KV point lookups and inserts beside bbolt, and bulk load beside put"},
	{"mr", "MapReduce word count beside sort|uniq, mawk and PySpark; -sort for the TeraSort-style sort"},
	{"build", "a parallel C build inside a mount beside local disk"},
	{"nfs", "a large file copied through the NFSv3 bridge with libnfs nfs-cp beside put and get"},
}

func printBenchHelp() {
	fmt.Fprintln(stdout, "usage: plasma bench BENCHMARK [options]   ('plasma bench BENCHMARK -help' for options)")
	fmt.Fprintln(stdout, "\nEvery benchmark measures its reference in the same run and prints the ratio.")
	fmt.Fprintln(stdout)
	for _, b := range benchmarks {
		fmt.Fprintf(stdout, "  %-13s %s\n", b[0], b[1])
	}
}

func intList(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, usagef("bad list %q (e.g. 1,2,8)", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func cmdBench(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("which benchmark? seq, lookup, create, random, parallel-cat, metarates, fdtree, append, mount-seq, security, kv, mr, build, nfs ('plasma bench -help' describes them)")
	}
	which := args[0]
	if isHelpArg(which) {
		printBenchHelp()
		return nil
	}
	if which == "warm-memory" {
		// On a VM whose memory the hypervisor backs lazily, the first
		// touch of each page costs microseconds; whichever side of a
		// comparison runs first would pay it. Touch it all once.
		var size int64 = 16 << 30
		wf := newFlags("bench warm-memory", "[-size BYTES]", "Touch memory once so first-touch costs of the hypervisor do not skew benchmarks.", false)
		wf.Var(sizeFlag{&size}, "size", "bytes to touch")
		if err := wf.parse(args[1:]); err != nil {
			return err
		}
		b := make([]byte, size)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Fprintf(stdout, "touched %s\n", human(uint64(size)))
		return nil
	}
	if which == "kv" {
		return cmdBenchKV(ctx, args[1:])
	}
	if which == "mr" {
		return cmdBenchMR(ctx, args[1:])
	}
	if which == "build" {
		return cmdBenchBuild(ctx, args[1:])
	}
	if which == "fuse-loopback" {
		// The loopback reference of -loopback, in its own process.
		if len(args) != 3 {
			return usagef("bench fuse-loopback ORIGINAL MOUNTPOINT")
		}
		return bench.ServeLoopback(ctx, args[1], args[2], stdout)
	}
	if which == "echo-server" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, ln.Addr().String())
		return bench.EchoServer(ln)
	}
	f := newFlags("bench "+which, "[options]", "Run a benchmark against the configured cluster; the reference runs in the same process.", true)
	asJSON := f.Bool("json", false, "print JSON")
	localDir := f.String("localdir", os.TempDir(), "directory for local reference files (put it on the datanodes' disk)")
	var size int64 = 2 << 30
	f.Var(sizeFlag{&size}, "size", "seq, nfs, mount-seq: file size")
	runs := f.Int("runs", 3, "seq, nfs, mount-seq: repetitions (medians reported)")
	repsFlag := f.String("reps", "1,2", "seq: replication factors")
	n := f.Int("n", 10000, "operations (per client)")
	clientsFlag := f.String("P", "1", "clients, comma-separated list (lookup, create), or count (parallel-cat)")
	ino := f.Uint64("ino", 0, "lookup: inode number (default: the root)")
	mode := f.String("mode", "durable", "create, metarates, fdtree: durable or async commits (relaxed labels a namenode started with -relaxed)")
	cold := f.Bool("cold", false, "random: also measure with dropped caches (root)")
	npFlag := f.String("np", "1,2,4", "metarates: process counts")
	shared := f.Bool("shared-dir", false, "metarates: all processes in one directory")
	tgt := f.String("target", "native", "metarates, fdtree: 'native' (PlasmaFS API) or a directory (e.g. of a PlasmaFS mount); append, mount-seq: a directory of a mount")
	var refs multiFlag
	f.Var(&refs, "ref", "metarates, fdtree, append: also run in this directory in the same run, as a reference (repeatable)")
	loopback := f.String("loopback", "", "metarates, fdtree, append: also run through go-fuse's loopback filesystem of this directory, as a reference")
	plainConf := f.String("plain", "", "security: client config file of a cluster at level none to compare with")
	levels := f.Int("levels", 3, "fdtree: tree depth")
	dirs := f.Int("dirs", 4, "fdtree: subdirectories per directory")
	files := f.Int("files", 10, "fdtree: files per directory")
	record := f.Int("record", 64, "append: bytes per append")
	var prefill int64
	f.Var(sizeFlag{&prefill}, "prefill", "append: bytes written (and fsynced) to the file before the timed appends")
	plasmaPath := f.String("path", "/", "mount-seq: the PlasmaFS path of -target's directory (for the put/get reference)")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	cfg, err := client.LoadConfig(f.cluster, f.namenodes)
	if err != nil {
		return err
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	var rep *bench.Report
	switch which {
	case "seq":
		reps, err := intList(*repsFlag)
		if err != nil {
			return err
		}
		rep, err = bench.Seq(ctx, c, bench.SeqOptions{Size: size, LocalDir: *localDir, Runs: *runs, Reps: reps})
		if err != nil {
			return err
		}
	case "nfs":
		if rep, err = bench.NFS(ctx, c, bench.NFSOptions{Size: size, LocalDir: *localDir, Runs: *runs}); err != nil {
			return err
		}
	case "lookup":
		cl, err := intList(*clientsFlag)
		if err != nil {
			return err
		}
		if len(f.pos) == 1 {
			if *ino, err = strconv.ParseUint(f.pos[0], 10, 64); err != nil {
				return usagef("bad inode %q", f.pos[0])
			}
		}
		if rep, err = bench.Lookup(ctx, cfg, bench.LookupOptions{N: *n, Clients: cl, Ino: *ino}); err != nil {
			return err
		}
	case "create":
		cl, err := intList(*clientsFlag)
		if err != nil {
			return err
		}
		dir := "/plasma-bench-create"
		if len(f.pos) == 1 {
			dir = f.pos[0]
		}
		if rep, err = bench.Create(ctx, cfg, bench.CreateOptions{N: *n, Clients: cl, Dir: dir, DBDir: *localDir, Mode: *mode}); err != nil {
			return err
		}
	case "random":
		if len(f.pos) != 1 {
			return usagef("random needs a FILE")
		}
		if rep, err = bench.Random(ctx, c, bench.RandomOptions{N: *n, File: f.pos[0], LocalDir: *localDir, Cold: *cold}); err != nil {
			return err
		}
	case "parallel-cat":
		if len(f.pos) != 1 {
			return usagef("parallel-cat needs a FILE")
		}
		p, err := strconv.Atoi(*clientsFlag)
		if err != nil || p < 1 {
			return usagef("-P must be a count")
		}
		if rep, err = bench.ParallelCat(ctx, cfg, f.pos[0], p); err != nil {
			return err
		}
	case "security":
		plainCfg, err := clusterConfigFile(*plainConf)
		if err != nil {
			return err
		}
		if rep, err = bench.Security(ctx, bench.SecurityOptions{Secure: cfg, Plain: plainCfg, N: *n, FileSize: size}); err != nil {
			return err
		}
	case "metarates":
		np, err := intList(*npFlag)
		if err != nil {
			return err
		}
		if rep, err = runBeside(*tgt, refs, *loopback, func(target string) (*bench.Report, error) {
			return bench.Metarates(ctx, cfg, bench.MetaratesOptions{NP: np, N: *n, SharedDir: *shared, Target: target, Root: "/plasma-bench-meta", Async: *mode == "async"})
		}); err != nil {
			return err
		}
	case "fdtree":
		if rep, err = runBeside(*tgt, refs, *loopback, func(target string) (*bench.Report, error) {
			return bench.Fdtree(ctx, cfg, bench.FdtreeOptions{Levels: *levels, Dirs: *dirs, Files: *files, Target: target, Root: "/plasma-bench-fdtree", Async: *mode == "async"})
		}); err != nil {
			return err
		}
	case "append":
		if *tgt == "native" {
			return usagef("append needs -target DIR (a directory of a mount)")
		}
		if *record < 1 || *record > 1<<20 {
			return usagef("-record must be 1..1048576 bytes")
		}
		if rep, err = runBeside(*tgt, refs, *loopback, func(target string) (*bench.Report, error) {
			return bench.Append(bench.AppendOptions{Dir: target, N: *n, Record: *record, Prefill: prefill})
		}); err != nil {
			return err
		}
	case "mount-seq":
		if *tgt == "native" {
			return usagef("mount-seq needs -target DIR (a directory of a PlasmaFS mount) and -path (its PlasmaFS path)")
		}
		if rep, err = bench.MountSeq(ctx, c, bench.MountSeqOptions{Target: *tgt, Path: *plasmaPath, Size: size, LocalDir: *localDir, Runs: *runs}); err != nil {
			return err
		}
	default:
		return usagef("unknown benchmark %q", which)
	}
	rep.Print(stdout, *asJSON)
	return nil
}

// runBeside runs a metadata benchmark against target ("native" or a
// directory), then in the same run against each reference directory and
// through go-fuse's loopback filesystem of the loopback directory (if
// set), and reports each result beside the references'.
func runBeside(target string, refs []string, loopback string, run func(target string) (*bench.Report, error)) (*bench.Report, error) {
	if len(refs) == 0 && loopback == "" {
		return run(target)
	}
	rep, err := run(target)
	if err != nil {
		return nil, err
	}
	var others []bench.Reference
	for _, d := range refs {
		r, err := run(d)
		if err != nil {
			return nil, fmt.Errorf("reference %s: %w", d, err)
		}
		others = append(others, bench.Reference{Name: bench.DescribeDir(d), Report: r})
	}
	if loopback != "" {
		lb, err := bench.StartLoopback(loopback)
		if err != nil {
			return nil, err
		}
		r, err := run(lb.Dir)
		lb.Stop()
		if err != nil {
			return nil, fmt.Errorf("loopback reference over %s: %w", loopback, err)
		}
		others = append(others, bench.Reference{Name: "go-fuse loopback over " + bench.DescribeDir(lb.Orig), Report: r})
	}
	name := "PlasmaFS native API"
	if target != "native" {
		name = bench.DescribeDir(target)
	}
	return bench.Beside(rep, name, others...), nil
}

// cmdBenchBuild runs the parallel C build of seed 003 in a directory (of
// a PlasmaFS mount) beside the same build in local reference directories.
func cmdBenchBuild(ctx context.Context, args []string) error {
	f := newFlags("bench build", "-target DIR -ref DIR [-loopback DIR] [options]", `Seed 003 in miniature: write a generated C project (-files modules, a main.c and a
Makefile), then as the seed did (make clean; read every file; sync) time make -jN all,
time make again (nothing to do) and time removing the tree, in -target (a directory of
the PlasmaFS mount) and in the same run in each -ref directory (the local filesystem the
cluster runs on) and through go-fuse's loopback filesystem of -loopback. Every side must
build the same program. Reports median times and time ratios (lower is better).`, false)
	asJSON := f.Bool("json", false, "print JSON")
	target := f.String("target", "", "directory to build in (e.g. in a PlasmaFS mount)")
	var refs multiFlag
	f.Var(&refs, "ref", "reference directory (repeatable), on the filesystem the cluster runs on")
	loopback := f.String("loopback", "", "also build through go-fuse's loopback filesystem of this directory")
	files := f.intRange("files", 40, 1, 1000, "generated .c modules")
	jobs := f.intRange("j", 2, 1, 256, "make -j")
	runs := f.intRange("runs", 3, 1, 100, "repetitions (medians reported)")
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.pos) != 0 {
		return usagef("unexpected argument %q", f.pos[0])
	}
	if *target == "" {
		return usagef("-target DIR is required")
	}
	o := bench.BuildOptions{Target: *target, Refs: refs, Files: *files, Jobs: *jobs, Runs: *runs}
	if *loopback != "" {
		lb, err := bench.StartLoopback(*loopback)
		if err != nil {
			return err
		}
		defer lb.Stop()
		o.Refs = append(o.Refs, lb.Dir)
	}
	rep, err := bench.Build(ctx, o)
	if err != nil {
		return err
	}
	rep.Print(stdout, *asJSON)
	return nil
}

// clusterConfigFile reads the first cluster of a client configuration file.
func clusterConfigFile(path string) (client.Config, error) {
	if path == "" {
		return client.Config{}, usagef("-plain FILE is required")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return client.Config{}, err
	}
	es, err := client.ParseConfigFile(string(b))
	if err != nil || len(es) == 0 {
		return client.Config{}, fmt.Errorf("%s: no cluster (%v)", path, err)
	}
	e := es[0]
	return client.Config{Cluster: e.Name, Namenodes: e.Namenodes, Security: e.Security, DataSecurity: e.DataSecurity, CredentialFile: e.Credential}, nil
}
