package cli

import (
	"context"
	"fmt"

	"github.com/plasmafs/plasma/client"
)

// The parts of the command line other programs of the project share with
// plasma (cmd/plasma-bench): flags with the common client options, usage
// errors, exit statuses and the same handling of signals and errors.

// Command is a subcommand of another program.
type Command struct {
	Name, Args, Summary string
	Run                 func(ctx context.Context, args []string) error
}

// RunCommand runs c as a command of program prog and returns its exit
// status, as plasma's own commands do.
func RunCommand(prog string, c Command, args []string) int {
	return runCommand(prog, command{c.Name, c.Args, c.Summary, c.Run}, args)
}

// Usagef is a usage error: the program exits with status 2 after one line
// and the usage line.
func Usagef(format string, args ...any) error { return usagef(format, args...) }

// PrintUsage reports a usage error of program prog (no command) on
// stderr and returns the usage exit status.
func PrintUsage(prog, msg string) int {
	fmt.Fprintf(stderr, "%s: %s\n", prog, escapeText(msg))
	return exitUsage
}

// IsHelpArg says whether s asks for help (-h, -help, --help, help).
func IsHelpArg(s string) bool { return isHelpArg(s) }

// MultiFlag is a repeatable string flag.
type MultiFlag = multiFlag

// Flags is a command's flag set: the flag package's, plus sizes and
// ranges, the common client options (-cluster, -namenode) and options
// after positional arguments.
type Flags struct{ *flags }

// NewFlags makes the flag set of command name of program prog; client
// adds the cluster selection options.
func NewFlags(prog, name, args, summary string, client bool) *Flags {
	f := newFlags(name, args, summary, client)
	f.prog = prog
	return &Flags{f}
}

// Parse parses args (a usage error, or flag.ErrHelp after printing the
// help on stdout).
func (f *Flags) Parse(args []string) error { return f.parse(args) }

// Args are the positional arguments after Parse.
func (f *Flags) Args() []string { return f.pos }

// Size defines a size flag (65536, 64K, 1M…).
func (f *Flags) Size(p *int64, name, usage string) { f.Var(sizeFlag{p}, name, usage) }

// SizeRange defines a size flag whose values must lie in min..max bytes.
func (f *Flags) SizeRange(p *int64, name string, min, max int64, usage string) {
	f.sizeRange(p, name, min, max, usage)
}

// IntRange defines an integer flag whose values must lie in min..max.
func (f *Flags) IntRange(name string, def, min, max int, usage string) *int {
	return f.intRange(name, def, min, max, usage)
}

// Config is the client configuration the cluster options select.
func (f *Flags) Config() (client.Config, error) { return client.LoadConfig(f.cluster, f.namenodes) }

// Connect connects to the cluster the options select.
func (f *Flags) Connect(ctx context.Context) (*client.Client, error) { return f.connect(ctx) }

// Human renders a byte count for people: 512 B, 1.5 KiB, 2.0 GiB.
func Human(b uint64) string { return human(b) }

// ReadToken reads a task server token file ("" for no file).
func ReadToken(file string) (string, error) { return readToken(file) }
