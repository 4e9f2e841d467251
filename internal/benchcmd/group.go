package benchcmd

import (
	"context"
	"os"

	"github.com/plasmafs/plasma/internal/bench"
	"github.com/plasmafs/plasma/internal/cli"
)

func cmdBenchCreateGroup(ctx context.Context, args []string) error {
	f := cli.NewFlags(prog, "create-group", "[options]", "create+commit of empty files on a 3-member namenode group and on a single namenode, both\n"+
		"started by this command alike (level none, one datanode each); rounds alternate, medians are\n"+
		"compared (goal: durable ≥ 0.7, async ≥ 0.8 of the single namenode). Then the leader is killed\n"+
		"(-9) -failovers times, each time measuring until a durable commit is acknowledged again.", false)
	asJSON := f.Bool("json", false, "print JSON")
	var o bench.GroupOptions
	f.StringVar(&o.Dir, "localdir", os.TempDir(), "directory for the namenodes' databases (removed afterwards)")
	f.StringVar(&o.Plasma, "plasma", defaultPlasma(), "the plasma `binary` that runs the namenodes")
	f.StringVar(&o.Mode, "mode", "durable", "durable or async commits")
	n := f.IntRange("n", 2000, 1, 1<<30, "files per client per round")
	rounds := f.IntRange("rounds", 3, 1, 1000, "rounds per side")
	failovers := f.IntRange("failovers", 20, 0, 1000, "kills of the leader for the failover time (0: none)")
	clients := f.String("P", "1,8", "clients, comma-separated list")
	if err := f.Parse(args); err != nil {
		return err
	}
	if len(f.Args()) != 0 {
		return cli.Usagef("unexpected argument %q", f.Args()[0])
	}
	if o.Mode != "durable" && o.Mode != "async" {
		return cli.Usagef("-mode must be durable or async, not %q", o.Mode)
	}
	cl, err := intList(*clients)
	if err != nil {
		return err
	}
	o.N, o.Rounds, o.Failovers, o.Clients = *n, *rounds, *failovers, cl
	rep, err := bench.Group(ctx, o)
	if err != nil {
		return err
	}
	rep.Print(stdout, *asJSON)
	return nil
}
