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
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientconf"
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

// Exit statuses: scripts can rely on these.
const (
	exitOK      = 0 // success (also for -help)
	exitFailure = 1 // the command failed; one line on stderr says why
	exitUsage   = 2 // bad command line: one line on stderr and the usage line
	// exitUnchecked: fsck found no problem but could not check everything.
	exitUnchecked = 3
)

// usageError makes Main exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitStatus makes Main exit with this status without printing anything
// (the message was printed already, e.g. by a child process).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

var stdout io.Writer = os.Stdout
var stderr io.Writer = os.Stderr

// Main runs the plasma command with args and returns the exit status.
func Main(args []string) int {
	if len(args) == 0 || isHelpArg(args[0]) {
		if len(args) > 1 {
			return Main([]string{args[1], "-help"})
		}
		printHelp(stdout)
		return exitOK
	}
	name := args[0]
	if a, ok := aliases[name]; ok {
		name = a
	}
	if name == "datanode" && len(args) > 1 && args[1] == "init" {
		name, args = "datanode init", args[1:]
	}
	if groups[name] {
		if len(args) == 1 || isHelpArg(args[1]) {
			return groupHelp(name, len(args) == 1)
		}
		name, args = name+" "+args[1], args[1:]
	}
	for _, c := range commands {
		if c.name == name {
			return runCommand("plasma", c, args[1:])
		}
	}
	var near []string
	base, _, _ := strings.Cut(name, " ")
	for _, c := range commands {
		if strings.HasPrefix(c.name, base+" ") {
			near = append(near, "'plasma "+c.name+"'")
		}
	}
	if len(near) > 0 {
		sort.Strings(near)
		fmt.Fprintf(stderr, "plasma: unknown command %q (try %s)\n", escapeText(name), strings.Join(near, " or "))
	} else {
		fmt.Fprintf(stderr, "plasma: unknown command %q (see 'plasma help')\n", escapeText(name))
	}
	return exitUsage
}

// runCommand runs command c of program prog (plasma, plasma-bench) with
// args and returns the exit status: Ctrl-C and SIGTERM cancel its context,
// a usage error prints one line and the usage line, another error one
// line.
func runCommand(prog string, c command, args []string) int {
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
	err := c.run(ctx, args)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	}
	var es exitStatus
	if errors.As(err, &es) {
		return int(es)
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s %s: %s\nusage: %s %s %s\n", prog, c.name, escapeText(ue.msg), prog, c.name, c.args)
		return exitUsage
	}
	fmt.Fprintf(stderr, "%s %s: %s\n", prog, c.name, oneLine(err))
	return exitFailure
}

// groups are the commands that only name a family of subcommands
// ("plasma cluster up", "plasma kv lookup", ...).
var groups = map[string]bool{"cluster": true, "kv": true, "mr": true}

func isHelpArg(s string) bool { return s == "-h" || s == "-help" || s == "--help" || s == "help" }

// groupHelp lists a group's subcommands: on stdout with status 0 when help
// was asked for, on stderr with the usage status when the subcommand is
// missing.
func groupHelp(group string, missing bool) int {
	w, code := stdout, exitOK
	if missing {
		w, code = stderr, exitUsage
		fmt.Fprintf(w, "plasma %s: missing subcommand\n", group)
	}
	fmt.Fprintf(w, "usage: plasma %s SUBCOMMAND [options]   ('plasma %s SUBCOMMAND -help' for options)\n\n", group, group)
	cs := append([]command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
			fmt.Fprintf(w, "  %-12s %s\n", sub, c.summary)
		}
	}
	return code
}

// oneLine renders an error as one line of text: joined errors are separated
// by "; ", control characters and invalid UTF-8 are escaped.
func oneLine(err error) string { return escapeText(strings.ReplaceAll(err.Error(), "\n", "; ")) }

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
$PLASMAFS_CREDENTIAL, $PLASMAFS_SECURITY and $PLASMAFS_DATA_SECURITY (none, auth, integrity, privacy).
Async commits leave their datanode syncs to the namenode's durability point;
$PLASMAFS_DEFER_DATA_SYNC=0 has them sync first, as before (README, "async commit").
Experimental: $PLASMAFS_JOURNAL_SMALL_WRITES=1 journals small appends of durable commits
in the namenode's commit log instead of syncing the datanodes first.
Exit status: 0 success, 1 failure (one line on stderr naming the path or node), 2 usage error,
3 (fsck) no problems found but some replicas could not be checked.`)
}

// flags is a flag set with the common client options.
type flags struct {
	*flag.FlagSet
	name, args, summary string
	prog                string // the program, if not plasma (plasma-bench)
	cluster             string
	namenodes           multiFlag
	pos                 []string // positional arguments
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// intRange is an integer flag accepting only min..max.
type intRange struct {
	v        *int
	min, max int
}

func (r intRange) String() string {
	if r.v == nil {
		return ""
	}
	return strconv.Itoa(*r.v)
}

func (r intRange) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return errors.New("not an integer")
	}
	if n < int64(r.min) || n > int64(r.max) {
		return fmt.Errorf("must be %d..%d", r.min, r.max)
	}
	*r.v = int(n)
	return nil
}

// intRange defines an integer flag whose values must lie in min..max.
func (f *flags) intRange(name string, def, min, max int, usage string) *int {
	v := new(int)
	*v = def
	f.Var(intRange{v, min, max}, name, fmt.Sprintf("%s (%d..%d)", usage, min, max))
	return v
}

// durationRange is a duration flag accepting only min..max.
type durationRange struct {
	v        *time.Duration
	min, max time.Duration
}

func (r durationRange) String() string {
	if r.v == nil {
		return ""
	}
	return r.v.String()
}

func (r durationRange) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (e.g. 500ms, 10s, 5m)")
	}
	if d < r.min || d > r.max {
		return fmt.Errorf("must be from %v to %v", r.min, r.max)
	}
	*r.v = d
	return nil
}

// durationRange defines a duration flag whose values must lie in min..max
// (negative durations are refused by a positive min).
func (f *flags) durationRange(name string, def, min, max time.Duration, usage string) *time.Duration {
	v := new(time.Duration)
	*v = def
	f.Var(durationRange{v, min, max}, name, fmt.Sprintf("%s (%v..%v)", usage, min, max))
	return v
}

// sizeRange defines a size flag (65536, 64K, 1M, 4G, 1T) whose values must
// lie in min..max bytes.
func (f *flags) sizeRange(p *int64, name string, min, max int64, usage string) {
	f.Var(sizeRangeFlag{v: p, min: min, max: max}, name, fmt.Sprintf("%s (%s..%s)", usage, sizeString(min), sizeString(max)))
}

func newFlags(name, args, summary string, client bool) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), name: name, args: args, summary: summary}
	// Errors are reported by Main (one line and the usage line); the
	// whole help only when asked for (-help), on stdout.
	f.SetOutput(io.Discard)
	f.Usage = func() {}
	if client {
		f.StringVar(&f.cluster, "cluster", "", "cluster name (from ~/.plasmafs)")
		f.Var(&f.namenodes, "namenode", "namenode `host:port` (repeatable)")
	}
	return f
}

// printHelp prints the command's usage, summary and options to w.
func (f *flags) printHelp(w io.Writer) {
	prog := f.prog
	if prog == "" {
		prog = "plasma"
	}
	fmt.Fprintf(w, "usage: %s %s %s\n\n%s\n\noptions:\n", prog, f.name, f.args, f.summary)
	f.SetOutput(w)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
}

// parse parses args, allowing options after positional arguments too.
func (f *flags) parse(args []string) error {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.printHelp(stdout)
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
	c, err := client.New(ctx, cfg)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("%w (no namenode listens at %s, named by %s: is the cluster up? Start it with 'plasma cluster up', or check %s)",
			err, strings.Join(cfg.Namenodes, ", "), f.namenodeSource(), "$PLASMAFS_CONFIG, $PLASMAFS_NAMENODES or -namenode")
	}
	return c, err
}

// namenodeSource says where the namenode addresses come from.
func (f *flags) namenodeSource() string {
	switch {
	case len(f.namenodes) > 0:
		return "-namenode"
	case os.Getenv("PLASMAFS_NAMENODES") != "":
		return "$PLASMAFS_NAMENODES"
	}
	return clientconf.Path()
}
