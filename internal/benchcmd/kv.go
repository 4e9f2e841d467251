package benchcmd

import (
	"context"
	"os"

	"github.com/plasmafs/plasma/internal/bench"
	"github.com/plasmafs/plasma/internal/cli"
)

// cmdBenchKV is 'plasma bench kv': seed 002 scaled down, beside its
// references.
func cmdBenchKV(ctx context.Context, args []string) error {
	f := cli.NewFlags(prog, "kv", "[options]", "Plasma KV beside references measured in the same run: bulk load vs plasma put; HTTP lookups of\n"+
		"≈30 KB values (seed 002's shape, scaled down) vs the same server over a local copy of the file and vs\n"+
		"net/http static files; Go API lookups of 1 KB values vs the local copy and SQLite; inserts vs SQLite.", true)
	asJSON := f.Bool("json", false, "print JSON")
	var o bench.KVOptions
	f.StringVar(&o.Dir, "dir", "/plasma-bench-kv", "PlasmaFS directory for the databases (removed afterwards)")
	f.StringVar(&o.LocalDir, "localdir", os.TempDir(), "directory for the local references (put it on the datanodes' disk)")
	keys := f.IntRange("keys", 4000, 1, 1<<24, "keys of the HTTP database")
	vsize := f.IntRange("value-size", 30000, 1, 1<<30, "their average value size")
	conns := f.IntRange("conns", 100, 1, 10000, "HTTP keep-alive connections")
	reqs := f.IntRange("requests", 50000, 1, 1<<30, "HTTP GETs per measurement")
	var cache int64 = 32 << 20
	f.SizeRange(&cache, "cache", 1<<20, 1<<40, "kv cache of the servers (blocks and index)")
	small := f.IntRange("small-keys", 20000, 1, 1<<24, "keys of 1 KB for the Go API measurements")
	lookups := f.IntRange("lookups", 20000, 1, 1<<30, "Go API lookups per client")
	clients := f.String("P", "1,8", "Go API lookup clients and HTTP PUT clients, comma-separated")
	inserts := f.IntRange("inserts", 300, 1, 1<<24, "single-key commits (and PUTs per client)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if len(f.Args()) != 0 {
		return cli.Usagef("unexpected argument %q", f.Args()[0])
	}
	cl, err := intList(*clients)
	if err != nil {
		return err
	}
	o.Keys, o.ValueSize, o.Conns, o.Requests, o.Cache = *keys, *vsize, *conns, *reqs, cache
	o.SmallKeys, o.Lookups, o.Clients, o.Inserts = *small, *lookups, cl, *inserts
	c, err := f.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	rep, err := bench.KV(ctx, c, o)
	if err != nil {
		return err
	}
	rep.Print(stdout, *asJSON)
	return nil
}
