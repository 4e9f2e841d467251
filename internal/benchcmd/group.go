package benchcmd

import (
	"context"

	"github.com/plasmafs/plasma/internal/bench"
	"github.com/plasmafs/plasma/internal/cli"
)

func cmdBenchCreateGroup(ctx context.Context, args []string) error {
	f := cli.NewFlags(prog, "create-group", "[options]", "create+commit of empty files on a 3-member namenode group and on a single namenode, both\n"+
		"started by this command alike (level none, one datanode each); rounds alternate, medians are\n"+
		"compared (goal: durable ≥ 0.7, async ≥ 0.8 of the single namenode). Then the leader is killed\n"+
		"(-9) -failovers times, each time measuring until a durable commit is acknowledged again.", false)
	asJSON := f.Bool("json", false, "print JSON")
	cr := addCreateRounds(f, 2000, 3)
	failovers := f.IntRange("failovers", 20, 0, 1000, "kills of the leader for the failover time (0: none)")
	cl, err := cr.parse(f, args)
	if err != nil {
		return err
	}
	o := bench.GroupOptions{Dir: cr.dir, Plasma: cr.plasma, Mode: cr.mode, N: *cr.n, Rounds: *cr.rounds, Failovers: *failovers, Clients: cl}
	rep, err := bench.Group(ctx, o)
	if err != nil {
		return err
	}
	rep.Print(stdout, *asJSON)
	return nil
}
