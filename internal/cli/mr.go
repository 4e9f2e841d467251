package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/plasmafs/plasma/mapred"
)

// plasma mr: streaming MapReduce over PlasmaFS.
func init() {
	register("mr run", "[JOB.toml] [-input DIR] [-output DIR] [-work DIR] [-log DIR] [-map CMD] [-reduce CMD] [options]", "run a streaming MapReduce job and print its report", cmdMRRun)
	register("mr taskserver", "[-listen HOST:PORT] [-datanode HOST:PORT] [-slots N]", "run MapReduce tasks for job coordinators (one beside each datanode)", cmdMRTaskServer)
}

func cmdMRRun(ctx context.Context, args []string) error {
	f := newFlags("mr run", "[JOB.toml] [options]",
		`Run a streaming MapReduce job. The mapper and the reducer are shell commands (sh -c) that
read records on stdin and write "key TAB value" lines on stdout (an empty reducer is the
identity: the output is the sorted map output). The input is the regular files of the input
directory, read as text lines; the output directory, which must not exist, appears whole or not
at all: one file part-NNNNN per partition. Intermediate files go to WORK/JOBID and are removed at
the end; LOG/JOBID gets the report and the standard error of every attempt that wrote some or
failed. Options override the job file's keys (input, output, work, log, map, reduce, partitions,
split_size, sort_buffer, max_attempts, rep, output_rep, taskservers, local_slots, keep_work).
Without -taskserver or the job file's taskservers, the task servers that the client
configuration names for the cluster ('plasma cluster up' starts one beside each datanode and
writes them there, with their token file) run the tasks; with none there, or with -local, the
tasks run in this process. Exit status 1 if the job failed.`, true)
	var j mapred.Job
	set := map[string]bool{}
	str := func(p *string, name, usage string) {
		f.Func(name, usage, func(s string) error { *p = s; set[name] = true; return nil })
	}
	var fj mapred.Job // flag values, applied over the file
	str(&fj.Input, "input", "input `DIR` in PlasmaFS")
	str(&fj.Output, "output", "output `DIR` in PlasmaFS (must not exist)")
	str(&fj.Work, "work", "work `DIR` in PlasmaFS (default: "+defaultWork("/OUTPARENT/out")+", beside the output directory)")
	str(&fj.Log, "log", "log `DIR` in PlasmaFS (default "+mapred.DefaultLog+")")
	str(&fj.Map, "map", "mapper shell `command`")
	str(&fj.Reduce, "reduce", "reducer shell `command` (empty: identity)")
	str(&fj.Combine, "combine", "combiner shell `command`, run on each map task's sorted output before the shuffle")
	str(&fj.Name, "name", "job name")
	str(&fj.InputFormat, "input-format", "how input files are cut into records: lines (default), fixed (-record-size bytes each)\nor length-prefixed (4-byte big-endian length, then the record; each file one map task)")
	recordSize := f.intRange("record-size", 0, 0, 1<<30, "bytes per record of -input-format fixed")
	partitions := f.intRange("partitions", 0, 0, 100000, "reduce tasks = output files (0: the job file's or 4)")
	attempts := f.intRange("max-attempts", 0, 0, 100, "attempts of a task before the job fails (0: the job file's or 3)")
	slots := f.intRange("slots", 0, 0, 1024, "in-process task slots without task servers (0: the job file's or 2)")
	var split, sortBuf int64
	f.sizeRange(&split, "split-size", 0, 1<<40, "input bytes per map task (0: the job file's or 64M)")
	f.sizeRange(&sortBuf, "sort-buffer", 0, 1<<40, "memory per task for sorting and merging (0: the job file's or 64M)")
	var servers multiFlag
	f.Var(&servers, "taskserver", "task server `host:port` (repeatable; replaces the job file's)")
	keep := f.Bool("keep-work", false, "keep the intermediate files")
	local := f.Bool("local", false, "run the tasks in this process, not on the cluster's task servers")
	tokenFile := f.String("token-file", os.Getenv("PLASMAMR_TOKEN_FILE"), "`file` holding the task servers' token (default $PLASMAMR_TOKEN_FILE)")
	quiet := f.Bool("q", false, "print only the report")
	if err := f.parse(args); err != nil {
		return err
	}
	switch len(f.pos) {
	case 0:
	case 1:
		var err error
		if j, err = mapred.LoadJob(f.pos[0]); err != nil {
			return err
		}
	default:
		return usagef("one job file at most")
	}
	over := map[string]*string{"input": &j.Input, "output": &j.Output, "work": &j.Work, "log": &j.Log, "map": &j.Map, "reduce": &j.Reduce, "name": &j.Name, "input-format": &j.InputFormat, "combine": &j.Combine}
	from := map[string]string{"input": fj.Input, "output": fj.Output, "work": fj.Work, "log": fj.Log, "map": fj.Map, "reduce": fj.Reduce, "name": fj.Name, "input-format": fj.InputFormat, "combine": fj.Combine}
	for k, p := range over {
		if set[k] {
			*p = from[k]
		}
	}
	if j.Work == "" && strings.HasPrefix(j.Output, "/") && path.Clean(j.Output) != "/" {
		j.Work = defaultWork(j.Output)
	}
	if *partitions > 0 {
		j.Partitions = *partitions
	}
	if *recordSize > 0 {
		j.RecordSize = *recordSize
	}
	if *attempts > 0 {
		j.MaxAttempts = *attempts
	}
	if *slots > 0 {
		j.LocalSlots = *slots
	}
	if split > 0 {
		j.SplitSize = split
	}
	if sortBuf > 0 {
		j.SortBuffer = sortBuf
	}
	if len(servers) > 0 {
		j.TaskServers = servers
	}
	if *keep {
		j.KeepWork = true
	}
	auto := false // the task servers come from the client configuration
	if *local {
		j.TaskServers = nil
	} else if len(j.TaskServers) == 0 && len(f.namenodes) == 0 && os.Getenv("PLASMAFS_NAMENODES") == "" {
		cluster := f.cluster
		if cluster == "" {
			cluster = os.Getenv("PLASMAFS_CLUSTER")
		}
		ts, tf, err := clusterTaskServers(cluster)
		if err != nil {
			return err
		}
		j.TaskServers, auto = ts, true
		if len(ts) > 0 && *tokenFile == "" {
			*tokenFile = tf
		}
	}
	j.Defaults()
	if err := j.Validate(); err != nil {
		return usagef("%v", err)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var opt mapred.Options
	if !*quiet {
		opt.Log = stdout
	}
	token, err := readToken(*tokenFile)
	if err != nil {
		return err
	}
	for _, a := range j.TaskServers {
		r, err := mapred.Dial(ctx, a, token)
		if err != nil && auto {
			// One of the cluster's task servers may be restarting:
			// the others do the job.
			fmt.Fprintf(stderr, "plasma mr run: %v (not used)\n", err)
			continue
		}
		if err != nil {
			return err
		}
		opt.Runners = append(opt.Runners, r)
	}
	if auto && len(j.TaskServers) > 0 && len(opt.Runners) == 0 {
		return fmt.Errorf("none of the cluster's %d task servers answers (use -local to run the tasks here)", len(j.TaskServers))
	}
	rep, err := mapred.Run(ctx, c, j, opt)
	if rep != nil {
		fmt.Fprint(stdout, rep.Text())
	}
	return err
}

func cmdMRTaskServer(ctx context.Context, args []string) error {
	f := newFlags("mr taskserver", "[-listen HOST:PORT] [-datanode HOST:PORT] [-slots N]",
		`Run MapReduce task attempts for job coordinators ('plasma mr run -taskserver ADDR'), with
this process's PlasmaFS client configuration and credential. -datanode pairs it with the datanode
at that data address: coordinators schedule map tasks on the task server beside their input.
The commands of every job run as this process's user with its credential: anyone who can
submit tasks can act as it. With -token-file only requests carrying the file's token are
accepted (the protocol is plain HTTP: the token and the tasks travel unencrypted); without one
the server listens on loopback addresses only.
The first line printed is the address it listens on.`, true)
	listen := f.String("listen", "127.0.0.1:0", "address to listen on")
	dn := f.String("datanode", "", "data `address` of the paired datanode")
	slots := f.intRange("slots", 2, 1, 1024, "task attempts run at once")
	tokenFile := f.String("token-file", os.Getenv("PLASMAMR_TOKEN_FILE"), "`file` holding the token coordinators must present (default $PLASMAMR_TOKEN_FILE)")
	if err := f.parse(args); err != nil {
		return err
	}
	token, err := readToken(*tokenFile)
	if err != nil {
		return err
	}
	if host, _, err := net.SplitHostPort(*listen); token == "" && (err != nil || !isLoopback(host)) {
		return usagef("-listen %s: without -token-file a task server listens on a loopback address only", *listen)
	}
	if len(f.pos) != 0 {
		return usagef("unexpected argument %q", f.pos[0])
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	w := mapred.Worker{Name: ln.Addr().String()}
	if *dn != "" {
		nodes, err := c.Datanodes(ctx)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Addr == *dn {
				w.Node = n.Identity
			}
		}
		if w.Node == "" {
			ln.Close()
			return fmt.Errorf("-datanode %s: no datanode has that address", *dn)
		}
	}
	ts := mapred.NewTaskServer(c, w, *slots)
	ts.Token = token
	srv := &http.Server{Handler: ts, ReadHeaderTimeout: time.Minute}
	fmt.Fprintf(stdout, "%s\n", ln.Addr())
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// defaultWork is the work directory of a job that names none: beside its
// output directory, so that it is on the same cluster and the submitter
// may write there.
func defaultWork(output string) string {
	return path.Join(path.Dir(path.Clean(output)), ".plasma-mr-work")
}

// readToken reads a task server token file ("" for no file).
func readToken(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if len(t) < 16 {
		return "", fmt.Errorf("%s: a token of at least 16 characters is needed", file)
	}
	return t, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
