package benchcmd

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/plasmafs/plasma/internal/bench"
	"github.com/plasmafs/plasma/internal/cli"
)

// cmdBenchWebHDFS is 'plasma-bench webhdfs': the WebHDFS gateway beside
// put and get, and LISTSTATUS beside GETFILESTATUS of each entry.
func cmdBenchWebHDFS(ctx context.Context, args []string) error {
	f := cli.NewFlags(prog, "webhdfs", "[-size BYTES] [-runs N] [-entries N] [options]",
		`Start a WebHDFS gateway in this process on loopback (as 'plasma webhdfs' serves, with this
process's cluster credential, acting for the current user by pseudo authentication) and measure:
a file of -size bytes written with the two-step CREATE in one stream beside the same bytes put
with the client's CopyIn (what 'plasma put' does), and the file put read with OPEN beside the
same file got with WriteTo (what 'plasma get' does), each into a new file in -localdir, -runs
times, which of a pair goes first alternating; then -small-opens OPENs of a 4 KiB file beside as
many gets of it (what a request costs beyond the read itself); then a directory of -entries
empty files listed with one LISTSTATUS beside a GETFILESTATUS of each entry. Prints each rate,
the medians of the per-pair ratios (goal ≥ 0.7) with each pair's ratio, and the time ratios of
the small OPENs and of the listing (goal < 0.2).`, true)
	asJSON := f.Bool("json", false, "print JSON")
	var o bench.WebHDFSOptions
	o.Size = 256 << 20
	f.SizeRange(&o.Size, "size", 1, 1<<40, "bytes written and read")
	runs := f.IntRange("runs", 5, 1, 100, "repetitions (medians reported)")
	entries := f.IntRange("entries", 10000, 1, 1<<20, "entries of the listed directory")
	smallOpens := f.IntRange("small-opens", 200, 0, 1<<20, "OPENs of a 4 KiB file per run, beside as many gets of it (0: none)")
	f.StringVar(&o.LocalDir, "localdir", os.TempDir(), "directory for the local source and copies (put it on the datanodes' disk)")
	profile := f.String("cpuprofile", "", "write a CPU profile of the whole run (gateway, client and references) to `FILE`")
	if err := f.Parse(args); err != nil {
		return err
	}
	if len(f.Args()) != 0 {
		return cli.Usagef("unexpected argument %q", f.Args()[0])
	}
	o.Runs, o.Entries, o.SmallOpens = *runs, *entries, *smallOpens
	c, err := f.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if *profile != "" {
		pf, err := os.Create(*profile)
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := bench.WebHDFS(ctx, c, o)
	if err != nil {
		return err
	}
	rep.Print(stdout, *asJSON)
	return nil
}
