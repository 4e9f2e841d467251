package benchcmd

import (
	"context"
	"os"
	"time"

	"github.com/plasmafs/plasma/internal/bench"
	"github.com/plasmafs/plasma/internal/cli"
)

// cmdBenchReReplicate is re-replication after a datanode is killed beside
// cp of as many bytes, and user reads during it beside reads before.
func cmdBenchReReplicate(ctx context.Context, args []string) error {
	f := cli.NewFlags(prog, "rereplicate", "[options]", "Start a cluster of its own (a namenode with -dead-after 1s, three datanodes, level none) in\n"+
		"-localdir, write files of replication 2 (1.5 × -size: the killed datanode holds about -size),\n"+
		"kill a datanode and time the namenode putting every block back at two replicas, beside cp\n"+
		"(+ fsync) of as many bytes between two directories on the same disk (goal: ratio ≥ 0.5).\n"+
		"A reader reads the files all along: its throughput during the copies is compared with the\n"+
		"-window before the datanode was killed (goal: ratio ≥ 0.7).", false)
	asJSON := f.Bool("json", false, "print JSON")
	o := bench.ReReplicateOptions{Size: 1 << 30}
	f.StringVar(&o.Dir, "localdir", os.TempDir(), "directory for the cluster and the cp reference (removed afterwards)")
	f.StringVar(&o.Plasma, "plasma", defaultPlasma(), "the plasma `binary` that runs the cluster")
	f.Size(&o.Size, "size", "bytes the killed datanode holds (about)")
	f.DurationVar(&o.Window, "window", 10*time.Second, "how long reads are measured before the datanode is killed")
	f.BoolVar(&o.ShortCircuit, "short-circuit", false, "the reader reads the block files directly (a reader on the datanodes' machine);\nby default through the data protocol, as a reader on another machine")
	copies := f.IntRange("copies-per-node", 0, 0, 64, "the namenode's -copies-per-node (0: its default)")
	f.Size(&o.CopyRate, "copy-rate", "the datanodes' -copy-rate, bytes a second each sends for re-replication (0: their default)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if len(f.Args()) != 0 {
		return cli.Usagef("unexpected argument %q", f.Args()[0])
	}
	if o.Size < 64<<20 {
		return cli.Usagef("-size must be at least 64 MiB")
	}
	o.CopiesPerNode = *copies
	rep, err := bench.ReReplicate(ctx, o)
	if err != nil {
		return err
	}
	rep.Print(stdout, *asJSON)
	return nil
}
