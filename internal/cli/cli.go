package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/plasmafs/plasma/client"
)

type command struct {
	name    string
	args    string
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands []command

func register(name, args, summary string, run func(ctx context.Context, args []string) error) {
	commands = append(commands, command{name, args, summary, run})
}

var aliases = map[string]string{"list": "ls", "delete": "rm", "rename": "mv", "link": "ln", "copy": "cp"}

// usageError makes Main exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

var stdout io.Writer = os.Stdout
var stderr io.Writer = os.Stderr

// Main runs the plasma command with args and returns the exit status.
func Main(args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			return Main([]string{args[1], "-help"})
		}
		printHelp(stdout)
		return 0
	}
	name := args[0]
	if a, ok := aliases[name]; ok {
		name = a
	}
	if name == "datanode" && len(args) > 1 && args[1] == "init" {
		name, args = "datanode init", args[1:]
	}
	if name == "cluster" && len(args) > 1 {
		name, args = "cluster "+args[1], args[1:]
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		// The first Ctrl-C asks for a clean stop; a second one kills.
		go func() { <-ctx.Done(); stop() }()
		// PLASMA_CPUPROFILE=file writes a CPU profile of this command (for
		// benchmark notes: go tool pprof -top plasma file); %p in the name
		// becomes the process id, so a whole cluster can be profiled.
		if path := os.Getenv("PLASMA_CPUPROFILE"); path != "" {
			path = strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid()))
			if pf, err := os.Create(path); err == nil {
				pprof.StartCPUProfile(pf)
				defer func() { pprof.StopCPUProfile(); pf.Close() }()
			}
		}
		err := c.run(ctx, args[1:])
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "plasma %s: %s\nusage: plasma %s %s\n", c.name, ue.msg, c.name, c.args)
			return 2
		}
		fmt.Fprintf(stderr, "plasma %s: %s\n", c.name, oneLine(err))
		return 1
	}
	fmt.Fprintf(stderr, "plasma: unknown command %q (see 'plasma help')\n", args[0])
	return 2
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "plasma — PlasmaFS, a distributed filesystem with ACID transactions")
	fmt.Fprintln(w, "\nusage: plasma COMMAND [options] [args]   ('plasma COMMAND -help' for options)")
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	fmt.Fprintln(w)
	for _, c := range cs {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, `
Cluster selection (client commands): -cluster NAME, -namenode HOST:PORT (repeatable),
or $PLASMAFS_CLUSTER / $PLASMAFS_NAMENODES, or ~/.plasmafs ($PLASMAFS_CONFIG), which
'plasma cluster up' writes. PlasmaFS paths are absolute; globs expand on the PlasmaFS side.
Security: the credential and levels come from the cluster entry in ~/.plasmafs or from
$PLASMAFS_CREDENTIAL, $PLASMAFS_SECURITY and $PLASMAFS_DATA_SECURITY (none, auth, privacy).
Exit status: 0 success, 1 failure (one line on stderr naming the path or node), 2 usage error.`)
}

// flags is a flag set with the common client options.
type flags struct {
	*flag.FlagSet
	cluster   string
	namenodes multiFlag
	pos       []string // positional arguments
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func newFlags(name, args, summary string, client bool) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.SetOutput(stderr)
	f.Usage = func() {
		fmt.Fprintf(stderr, "usage: plasma %s %s\n\n%s\n\noptions:\n", name, args, summary)
		f.PrintDefaults()
	}
	if client {
		f.StringVar(&f.cluster, "cluster", "", "cluster name (from ~/.plasmafs)")
		f.Var(&f.namenodes, "namenode", "namenode `host:port` (repeatable)")
	}
	return f
}

// parse parses args, allowing options after positional arguments too.
func (f *flags) parse(args []string) error {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return usageError{err.Error()}
		}
		args = f.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
		if pos[len(pos)-1] == "--" {
			pos = append(pos[:len(pos)-1], args...)
			break
		}
	}
	f.pos = pos
	return nil
}

func (f *flags) connect(ctx context.Context) (*client.Client, error) {
	cfg, err := client.LoadConfig(f.cluster, f.namenodes)
	if err != nil {
		return nil, err
	}
	if os.Getenv("PLASMAFS_NO_SHORTCIRCUIT") != "" {
		cfg.NoShortCircuit = true
	}
	return client.New(ctx, cfg)
}
