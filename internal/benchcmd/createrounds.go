package benchcmd

import (
	"os"

	"github.com/plasmafs/plasma/internal/cli"
)

// createRounds are the flags the create+commit comparisons between
// namenodes this command starts (create-group, create-metrics) share:
// where the namenodes run and with which binary, the commit mode, and
// the rounds.
type createRounds struct {
	dir, plasma, mode string
	n, rounds         *int
	clients           *string
}

// addCreateRounds registers the shared flags on f, with the defaults of
// files per client per round (n) and rounds per side.
func addCreateRounds(f *cli.Flags, n, rounds int) *createRounds {
	c := &createRounds{}
	f.StringVar(&c.dir, "localdir", os.TempDir(), "directory for the namenodes' databases (removed afterwards)")
	f.StringVar(&c.plasma, "plasma", defaultPlasma(), "the plasma `binary` that runs the namenodes")
	f.StringVar(&c.mode, "mode", "durable", "durable or async commits")
	c.n = f.IntRange("n", n, 1, 1<<30, "files per client per round")
	c.rounds = f.IntRange("rounds", rounds, 1, 1000, "rounds per side")
	c.clients = f.String("P", "1,8", "clients, comma-separated list")
	return c
}

// parse parses args into f and checks what the shared flags allow: no
// arguments, a known mode, a list of client counts.
func (c *createRounds) parse(f *cli.Flags, args []string) (clients []int, err error) {
	if err := f.Parse(args); err != nil {
		return nil, err
	}
	if len(f.Args()) != 0 {
		return nil, cli.Usagef("unexpected argument %q", f.Args()[0])
	}
	if c.mode != "durable" && c.mode != "async" {
		return nil, cli.Usagef("-mode must be durable or async, not %q", c.mode)
	}
	return intList(*c.clients)
}
