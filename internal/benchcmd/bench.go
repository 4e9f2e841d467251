// Package benchcmd is the plasma-bench command: the seed benchmarks, each
// beside its reference measured in the same run. It lives outside the
// plasma binary that operators deploy, with what only benchmarks need (the
// bbolt and SQLite references, PySpark, the loopback filesystem).
package benchcmd

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/bench"
	"github.com/plasmafs/plasma/internal/cli"
	"github.com/plasmafs/plasma/internal/clientconf"
)

// prog is the program's name in messages.
const prog = "plasma-bench"

var stdout io.Writer = os.Stdout
var stderr io.Writer = os.Stderr

// benchmarks describes each benchmark for 'plasma-bench help'.
var benchmarks = [][2]string{
	{"seq", "put, get and cat of a large file per replication beside the same file written (with fsync) and read locally"},
	{"lookup", "synchronous inode lookups through the namenode beside a raw TCP ping-pong and an empty RPC"},
	{"create", "create+commit of empty files, -mode durable|async, beside a create-shaped SQLite commit, an O_DSYNC append and a TCP ping-pong"},
	{"create-group", "create+commit on a 3-namenode group beside a single namenode (both its own), and the failover time from a kill -9 of the leader"},
	{"create-metrics", "create+commit with metrics on (admin port scraped every second) beside metrics off, two namenodes of its own"},
	{"random", "random whole-block reads (counting namenode requests) beside the same reads of a local copy"},
	{"parallel-cat", "P concurrent readers of one file beside a single reader"},
	{"metarates", "create/stat/utime per process (seed 004) through the API or a mounted directory (-target)"},
	{"fdtree", "a deep directory tree created and removed (seed 004)"},
	{"append", "small appends each followed by fsync, through a mount (-target), beside a local directory (-ref)"},
	{"mount-seq", "a large file written and read through the FUSE mount beside put and get"},
	{"deferred-sync", "small files created, written and committed async with the datanodes' syncs deferred to the namenode (the default) beside the same with per-commit syncs (NoDeferDataSync)"},
	{"untar", "tar x and rm -rf of a source tree (-src) in a directory (-target, e.g. of a mount), beside -ref and -loopback"},
	{"security", "what each security level costs: stat round trips and block reads beside a plain cluster"},
	{"kv", "Plasma KV point lookups and inserts beside bbolt, and bulk load beside put"},
	{"mr", "MapReduce word count beside sort|uniq, mawk and PySpark; -sort for the TeraSort-style sort"},
	{"build", "a parallel C build inside a mount beside local disk"},
	{"webhdfs", "a large file written (CREATE) and read (OPEN) through the WebHDFS gateway beside put and get; LISTSTATUS beside GETFILESTATUS"},
	{"nfs", "a large file copied through the NFSv3 bridge with libnfs nfs-cp beside put and get"},
	{"rereplicate", "re-replication of a killed datanode's data beside cp on the same disk, and user reads during it beside before"},
	{"smallfiles", "trees of small files on a sparse datanode volume beside ext4's du; put/get of a large file on sparse beside fixed slots"},
	{"warm-memory", "touch memory once so that first-touch costs of the hypervisor do not skew a comparison"},
}

// commands are the benchmarks (and helpers) with options of their own;
// the others share clusterFlags (runClusterBench).
var commands = map[string]func(ctx context.Context, args []string) error{
	"warm-memory":    cmdWarmMemory,
	"kv":             cmdBenchKV,
	"create-metrics": cmdBenchCreateMetrics,
	"create-group":   cmdBenchCreateGroup,
	"mr":             cmdBenchMR,
	"webhdfs":        cmdBenchWebHDFS,
	"rereplicate":    cmdBenchReReplicate,
	"build":          cmdBenchBuild,
	"smallfiles":     cmdBenchSmallFiles,
	"fuse-loopback":  cmdFuseLoopback,
	"echo-server":    cmdEchoServer,
}

// Main runs plasma-bench with args and returns the exit status.
func Main(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "plasma-bench: which benchmark? ('plasma-bench help' describes them)")
		printHelp(stderr)
		return 2
	}
	if cli.IsHelpArg(args[0]) {
		printHelp(stdout)
		return 0
	}
	which := args[0]
	run := commands[which]
	if run == nil {
		if clusterBenchmarks[which] == nil {
			return cli.PrintUsage(prog, fmt.Sprintf("unknown benchmark %q (see 'plasma-bench help')", which))
		}
		run = func(ctx context.Context, args []string) error { return runClusterBench(ctx, which, args) }
	}
	return cli.RunCommand(prog, cli.Command{Name: which, Args: "[options]", Run: run}, args[1:])
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "usage: plasma-bench BENCHMARK [options]   ('plasma-bench BENCHMARK -help' for options)")
	fmt.Fprintln(w, "\nEvery benchmark measures its reference in the same run and prints the ratio.")
	fmt.Fprintln(w)
	for _, b := range benchmarks {
		fmt.Fprintf(w, "  %-13s %s\n", b[0], b[1])
	}
}

func intList(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, cli.Usagef("bad list %q (e.g. 1,2,8)", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// cmdWarmMemory touches memory once: on a VM whose memory the hypervisor
// backs lazily, the first touch of each page costs microseconds, and
// whichever side of a comparison ran first would pay it.
func cmdWarmMemory(ctx context.Context, args []string) error {
	var size int64 = 16 << 30
	f := cli.NewFlags(prog, "warm-memory", "[-size BYTES]", "Touch memory once so first-touch costs of the hypervisor do not skew benchmarks.", false)
	f.Size(&size, "size", "bytes to touch")
	if err := f.Parse(args); err != nil {
		return err
	}
	b := make([]byte, size)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	fmt.Fprintf(stdout, "touched %s\n", cli.Human(uint64(size)))
	return nil
}

// cmdFuseLoopback serves the loopback reference of -loopback, in its own
// process (bench.StartLoopback runs it).
func cmdFuseLoopback(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return cli.Usagef("fuse-loopback ORIGINAL MOUNTPOINT")
	}
	return bench.ServeLoopback(ctx, args[0], args[1], stdout)
}

// cmdEchoServer serves the TCP ping-pong reference of lookup and create,
// in its own process, and prints its address.
func cmdEchoServer(ctx context.Context, args []string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, ln.Addr().String())
	return bench.EchoServer(ln)
}

// clusterFlags are the options of the benchmarks that share them (each
// uses some).
type clusterFlags struct {
	asJSON     *bool
	localDir   *string
	size       int64
	runs       *int
	reps       *string
	n          *int
	clients    *string
	ino        *uint64
	mode       *string
	cold       *bool
	np         *string
	shared     *bool
	target     *string
	refs       cli.MultiFlag
	loopback   *string
	plainConf  *string
	levels     *int
	dirs       *int
	files      *int
	src        *string
	fileSize   *int
	fileRep    *int
	record     *int
	prefill    int64
	plasmaPath *string
	readsOnly  *bool
	pos        []string
	cfg        client.Config
	c          *client.Client
}

func defineClusterFlags(f *cli.Flags) *clusterFlags {
	o := &clusterFlags{size: 2 << 30}
	o.asJSON = f.Bool("json", false, "print JSON")
	o.localDir = f.String("localdir", os.TempDir(), "directory for local reference files (put it on the datanodes' disk)")
	f.Size(&o.size, "size", "seq, nfs, mount-seq: file size")
	o.runs = f.Int("runs", 3, "seq, nfs, mount-seq: repetitions (medians reported)")
	o.reps = f.String("reps", "1,2", "seq: replication factors")
	o.n = f.Int("n", 10000, "operations (per client)")
	o.clients = f.String("P", "1", "clients, comma-separated list (lookup, create), or count (parallel-cat)")
	o.ino = f.Uint64("ino", 0, "lookup: inode number (default: the root)")
	o.mode = f.String("mode", "durable", "create, metarates, fdtree: durable or async commits (relaxed labels a namenode started with -relaxed)")
	o.cold = f.Bool("cold", false, "random: also measure with dropped caches (root)")
	o.np = f.String("np", "1,2,4", "metarates: process counts")
	o.shared = f.Bool("shared-dir", false, "metarates: all processes in one directory")
	o.target = f.String("target", "native", "metarates, fdtree: 'native' (PlasmaFS API) or a directory (e.g. of a PlasmaFS mount); append, mount-seq: a directory of a mount")
	f.Var(&o.refs, "ref", "metarates, fdtree, append: also run in this directory in the same run, as a reference (repeatable)")
	o.loopback = f.String("loopback", "", "metarates, fdtree, append: also run through go-fuse's loopback filesystem of this directory, as a reference")
	o.plainConf = f.String("plain", "", "security: client config file of a cluster at level none to compare with")
	o.levels = f.Int("levels", 3, "fdtree: tree depth")
	o.dirs = f.Int("dirs", 4, "fdtree: subdirectories per directory")
	o.files = f.Int("files", 10, "fdtree: files per directory")
	o.fileSize = f.Int("file-size", 2048, "deferred-sync: bytes per file")
	o.fileRep = f.Int("rep", 2, "deferred-sync: replication of the files")
	o.src = f.String("src", "", "untar: the tree to extract (default: Go's $GOROOT/src/cmd)")
	o.record = f.Int("record", 64, "append: bytes per append")
	f.Size(&o.prefill, "prefill", "append: bytes written (and fsynced) to the file before the timed appends")
	o.plasmaPath = f.String("path", "/", "mount-seq: the PlasmaFS path of -target's directory (for the put/get reference)")
	o.readsOnly = f.Bool("reads-only", false, "mount-seq: only the reads (the file is written once, untimed), which of a pair goes first alternating")
	return o
}

// runClusterBench runs benchmark which against the configured cluster
// and prints its report: parse the shared options, connect, run.
func runClusterBench(ctx context.Context, which string, args []string) error {
	f := cli.NewFlags(prog, which, "[options]", "Run a benchmark against the configured cluster; the reference runs in the same process.", true)
	o := defineClusterFlags(f)
	if err := f.Parse(args); err != nil {
		return err
	}
	o.pos = f.Args()
	var err error
	if o.cfg, err = f.Config(); err != nil {
		return err
	}
	if o.c, err = client.New(ctx, o.cfg); err != nil {
		return err
	}
	defer o.c.Close()
	rep, err := clusterBenchmarks[which](ctx, o)
	if err != nil {
		return err
	}
	rep.Print(stdout, *o.asJSON)
	return nil
}

// clusterBenchmarks run one benchmark each with the shared options.
var clusterBenchmarks = map[string]func(ctx context.Context, o *clusterFlags) (*bench.Report, error){
	"seq": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		reps, err := intList(*o.reps)
		if err != nil {
			return nil, err
		}
		return bench.Seq(ctx, o.c, bench.SeqOptions{Size: o.size, LocalDir: *o.localDir, Runs: *o.runs, Reps: reps})
	},
	"nfs": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		return bench.NFS(ctx, o.c, bench.NFSOptions{Size: o.size, LocalDir: *o.localDir, Runs: *o.runs})
	},
	"lookup": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		cl, err := intList(*o.clients)
		if err != nil {
			return nil, err
		}
		if len(o.pos) == 1 {
			if *o.ino, err = strconv.ParseUint(o.pos[0], 10, 64); err != nil {
				return nil, cli.Usagef("bad inode %q", o.pos[0])
			}
		}
		return bench.Lookup(ctx, o.cfg, bench.LookupOptions{N: *o.n, Clients: cl, Ino: *o.ino})
	},
	"create": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		cl, err := intList(*o.clients)
		if err != nil {
			return nil, err
		}
		dir := "/plasma-bench-create"
		if len(o.pos) == 1 {
			dir = o.pos[0]
		}
		return bench.Create(ctx, o.cfg, bench.CreateOptions{N: *o.n, Clients: cl, Dir: dir, DBDir: *o.localDir, Mode: *o.mode})
	},
	"random": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		if len(o.pos) != 1 {
			return nil, cli.Usagef("random needs a FILE")
		}
		return bench.Random(ctx, o.c, bench.RandomOptions{N: *o.n, File: o.pos[0], LocalDir: *o.localDir, Cold: *o.cold})
	},
	"parallel-cat": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		if len(o.pos) != 1 {
			return nil, cli.Usagef("parallel-cat needs a FILE")
		}
		p, err := strconv.Atoi(*o.clients)
		if err != nil || p < 1 {
			return nil, cli.Usagef("-P must be a count")
		}
		return bench.ParallelCat(ctx, o.cfg, o.pos[0], p)
	},
	"security": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		plainCfg, err := clusterConfigFile(*o.plainConf)
		if err != nil {
			return nil, err
		}
		return bench.Security(ctx, bench.SecurityOptions{Secure: o.cfg, Plain: plainCfg, N: *o.n, FileSize: o.size})
	},
	"metarates": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		np, err := intList(*o.np)
		if err != nil {
			return nil, err
		}
		return runBeside(*o.target, o.refs, *o.loopback, func(target string) (*bench.Report, error) {
			return bench.Metarates(ctx, o.cfg, bench.MetaratesOptions{NP: np, N: *o.n, SharedDir: *o.shared, Target: target, Root: "/plasma-bench-meta", Async: *o.mode == "async"})
		})
	},
	"fdtree": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		return runBeside(*o.target, o.refs, *o.loopback, func(target string) (*bench.Report, error) {
			return bench.Fdtree(ctx, o.cfg, bench.FdtreeOptions{Levels: *o.levels, Dirs: *o.dirs, Files: *o.files, Target: target, Root: "/plasma-bench-fdtree", Async: *o.mode == "async"})
		})
	},
	"append": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		if *o.target == "native" {
			return nil, cli.Usagef("append needs -target DIR (a directory of a mount)")
		}
		if *o.record < 1 || *o.record > 1<<20 {
			return nil, cli.Usagef("-record must be 1..1048576 bytes")
		}
		return runBeside(*o.target, o.refs, *o.loopback, func(target string) (*bench.Report, error) {
			return bench.Append(bench.AppendOptions{Dir: target, N: *o.n, Record: *o.record, Prefill: o.prefill})
		})
	},
	"deferred-sync": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		cl, err := intList(*o.clients)
		if err != nil {
			return nil, err
		}
		return bench.DeferredSync(ctx, o.cfg, bench.DeferredSyncOptions{N: *o.n, Clients: cl, Size: *o.fileSize, Rep: *o.fileRep, Dir: "/plasma-bench-deferred-sync"})
	},
	"untar": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		if *o.target == "native" {
			return nil, cli.Usagef("untar needs -target DIR (a directory, e.g. of a mount)")
		}
		src := *o.src
		if src == "" {
			out, err := exec.Command("go", "env", "GOROOT").Output()
			if err != nil {
				return nil, fmt.Errorf("untar: no -src given and 'go env GOROOT' failed (%v): name a tree with -src", err)
			}
			src = filepath.Join(strings.TrimSpace(string(out)), "src", "cmd")
		}
		tarball, n, done, err := bench.MakeTarball(src)
		if err != nil {
			return nil, err
		}
		defer done()
		return runBeside(*o.target, o.refs, *o.loopback, func(target string) (*bench.Report, error) {
			return bench.Untar(bench.UntarOptions{Dir: target, Tarball: tarball, Files: n, Runs: *o.runs})
		})
	},
	"mount-seq": func(ctx context.Context, o *clusterFlags) (*bench.Report, error) {
		if *o.target == "native" {
			return nil, cli.Usagef("mount-seq needs -target DIR (a directory of a PlasmaFS mount) and -path (its PlasmaFS path)")
		}
		return bench.MountSeq(ctx, o.c, bench.MountSeqOptions{Target: *o.target, Path: *o.plasmaPath, Size: o.size, LocalDir: *o.localDir, Runs: *o.runs, ReadsOnly: *o.readsOnly})
	},
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
	f := cli.NewFlags(prog, "build", "-target DIR -ref DIR [-loopback DIR] [options]", `Seed 003 in miniature: write a generated C project (-files modules, a main.c and a
Makefile), then as the seed did (make clean; read every file; sync) time make -jN all,
time make again (nothing to do) and time removing the tree, in -target (a directory of
the PlasmaFS mount) and in the same run in each -ref directory (the local filesystem the
cluster runs on) and through go-fuse's loopback filesystem of -loopback. Every side must
build the same program. Reports median times and time ratios (lower is better).`, false)
	asJSON := f.Bool("json", false, "print JSON")
	target := f.String("target", "", "directory to build in (e.g. in a PlasmaFS mount)")
	var refs cli.MultiFlag
	f.Var(&refs, "ref", "reference directory (repeatable), on the filesystem the cluster runs on")
	loopback := f.String("loopback", "", "also build through go-fuse's loopback filesystem of this directory")
	files := f.IntRange("files", 40, 1, 1000, "generated .c modules")
	jobs := f.IntRange("j", 2, 1, 256, "make -j")
	runs := f.IntRange("runs", 3, 1, 100, "repetitions (medians reported)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if len(f.Args()) != 0 {
		return cli.Usagef("unexpected argument %q", f.Args()[0])
	}
	if *target == "" {
		return cli.Usagef("-target DIR is required")
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
		return client.Config{}, cli.Usagef("-plain FILE is required")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return client.Config{}, err
	}
	es, err := clientconf.Parse(string(b))
	if err != nil || len(es) == 0 {
		return client.Config{}, fmt.Errorf("%s: no cluster (%v)", path, err)
	}
	e := es[0]
	return client.Config{Cluster: e.Name, Namenodes: e.Namenodes, Security: e.Security, DataSecurity: e.DataSecurity, CredentialFile: e.Credential}, nil
}
