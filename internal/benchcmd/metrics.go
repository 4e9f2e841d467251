package benchcmd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/plasmafs/plasma/internal/bench"
	"github.com/plasmafs/plasma/internal/cli"
)

// cmdBenchCreateMetrics is create+commit with metrics on beside metrics
// off: two namenodes of its own, rounds alternating between them.
func cmdBenchCreateMetrics(ctx context.Context, args []string) error {
	f := cli.NewFlags(prog, "create-metrics", "[options]", "create+commit of empty files on two namenodes this command starts alike (level none), one\n"+
		"with an admin port whose /metrics is scraped every second, one without (it observes nothing);\n"+
		"rounds alternate, medians are compared (goal: ratio ≥ 0.97).", false)
	asJSON := f.Bool("json", false, "print JSON")
	cr := addCreateRounds(f, 3000, 5)
	cl, err := cr.parse(f, args)
	if err != nil {
		return err
	}
	o := bench.MetricsCostOptions{Dir: cr.dir, Plasma: cr.plasma, Mode: cr.mode, N: *cr.n, Rounds: *cr.rounds, Clients: cl}
	rep, err := bench.MetricsCost(ctx, o)
	if err != nil {
		return err
	}
	rep.Print(stdout, *asJSON)
	return nil
}

// defaultPlasma is the plasma binary beside this one, else plasma on PATH.
func defaultPlasma() string {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "plasma")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("plasma"); err == nil {
		return p
	}
	return "plasma"
}

// cmdBenchSmallFiles is what small files cost a sparse datanode volume
// beside ext4's du of the same tree, and put/get of a large file on a
// sparse volume beside one of fixed slots: clusters of its own.
func cmdBenchSmallFiles(ctx context.Context, args []string) error {
	f := cli.NewFlags(prog, "smallfiles", "-dir DIR [options]", "Trees of small files stored on a sparse datanode volume beside ext4's du of the same tree on\n"+
		"the same filesystem (goal: ratio ≤ 1.5), and put/get of a large file on a sparse volume beside a\n"+
		"volume of fixed slots (goal: ratio ≥ 0.95). DIR should be on the filesystem measured (e.g. a\n"+
		"journaled ext4 loop image); the clusters and trees are removed afterwards.", false)
	asJSON := f.Bool("json", false, "print JSON")
	var o bench.SmallFilesOptions
	f.StringVar(&o.Dir, "dir", "", "directory for the clusters and reference trees (required)")
	f.StringVar(&o.Plasma, "plasma", defaultPlasma(), "the plasma `binary` that runs the clusters")
	goSrc := ""
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if p := filepath.Join(strings.TrimSpace(string(out)), "src"); strings.TrimSpace(string(out)) != "" {
			if _, err := os.Stat(p); err == nil {
				goSrc = p
			}
		}
	}
	f.StringVar(&o.GoSrc, "gosrc", goSrc, "a real source tree to store too (\"\": none)")
	files := f.IntRange("files", 20000, 1, 1<<24, "files of the synthetic tree")
	runs := f.IntRange("runs", 3, 1, 100, "put/get repetitions per layout")
	o.Size, o.Volume = 512<<20, 4<<30
	f.Size(&o.Size, "size", "size of the large file")
	f.Size(&o.Volume, "volume", "each cluster's datanode volume")
	if err := f.Parse(args); err != nil {
		return err
	}
	if o.Dir == "" || len(f.Args()) != 0 {
		return cli.Usagef("-dir is required, and nothing else")
	}
	o.Files, o.Runs = *files, *runs
	rep, err := bench.SmallFiles(ctx, o)
	if err != nil {
		return err
	}
	rep.Print(stdout, *asJSON)
	return nil
}
