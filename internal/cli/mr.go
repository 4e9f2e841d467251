package cli

import (
	"context"
	"fmt"
	"github.com/plasmafs/plasma/internal/metrics"
	"net"
	"os"
	"path"
	"strings"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/mrexec"
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
writes them there) run the tasks; with none there, or with -local, the tasks run in this
process. On task servers the tasks run as you in PlasmaFS, with a credential that the namenode
delegates to this job (valid -credential-lifetime, usable for nothing but ordinary file access),
and as an unprivileged OS account. Exit status 1 if the job failed.`, true)
	var j mapred.Job
	set := map[string]bool{}
	str := func(p *string, name, usage string) {
		f.Func(name, usage, func(s string) error { *p = s; set[name] = true; return nil })
	}
	var fj mapred.Job // flag values, applied over the file
	str(&fj.Input, "input", "input `DIR` in PlasmaFS (file::DIR: a local directory, copied into PlasmaFS first)")
	str(&fj.Output, "output", "output `DIR` in PlasmaFS (must not exist; file::DIR: a local directory, filled at the end)")
	str(&fj.Work, "work", "work `DIR` in PlasmaFS (default: "+defaultWork("/OUTPARENT/out")+", beside the output directory)")
	str(&fj.Log, "log", "log `DIR` in PlasmaFS (default "+mapred.DefaultLog+")")
	str(&fj.Map, "map", "mapper shell `command`")
	str(&fj.Reduce, "reduce", "reducer shell `command` (empty: identity)")
	str(&fj.Combine, "combine", "combiner shell `command`, run on each map task's sorted output before the shuffle")
	str(&fj.Name, "name", "job name")
	str(&fj.InputFormat, "input-format", "how input files are cut into records: lines (default), fixed (-record-size bytes each),\nlength-prefixed (4-byte big-endian length, then the record; each file one map task)\nor auto (by each file's name: .var length-prefixed, .fixed<n> fixed, others lines)")
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
	credLife := f.durationRange("credential-lifetime", mapred.DefaultCredentialLifetime, time.Minute, auth.MaxDelegation, "how long the credential delegated to the job's tasks on task servers is valid (a job running longer fails)")
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
	opt := mapred.Options{CredentialLifetime: *credLife}
	if !*quiet {
		opt.Log = stdout
	}
	token, err := readToken(*tokenFile)
	if err != nil {
		return err
	}
	for _, a := range j.TaskServers {
		r, err := mrexec.Dial(ctx, a, c, token)
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
	f := newFlags("mr taskserver", "[-listen HOST:PORT] [-datanode HOST:PORT] [-slots N] [-credential FILE] [-run-as USER]",
		`Run MapReduce task attempts for job coordinators ('plasma mr run -taskserver ADDR').
-datanode pairs it with the datanode at that data address: coordinators schedule map tasks on
the task server beside their input.
Coordinators connect with the cluster's TLS (TLS 1.3, certificates on both sides, signed by
the cluster CA; -credential is this server's own, of role taskserver: 'plasma admin user add
NAME -taskserver'), so any user with a credential of the cluster may submit, and nothing
travels in clear. Each task runs with the credential that the namenode delegated to its
submitter for its job (never this server's): it reads and writes as the submitter, until
the credential expires; the server forgets it once the job's last task on it ends.
Run as root, the server runs the task commands unprivileged, each attempt in a fresh working
directory of its own under -work-base: they cannot read this server's credential or anything
else only root may read. Each attempt runs as a uid of -task-uids of its own (no account's;
its group is the same number), so that tasks of other jobs cannot reach its processes, and
whatever it leaves running is killed when it ends; with -task-uids none all run as the
account -run-as (default nobody). Run as another user, the commands run as that user,
so they could read its credential and other jobs' keys: then it runs only the tasks of -owner
(default: the user of the client configuration's credential).
On a cluster at security level none (which authenticates nobody) tasks run with this
process's client configuration; then without -token-file the server listens on loopback only.
The first line printed is the address it listens on.`, true)
	listen := f.String("listen", "127.0.0.1:0", "address to listen on")
	dn := f.String("datanode", "", "data `address` of the paired datanode")
	slots := f.intRange("slots", 2, 1, 1024, "task attempts run at once")
	credFile := f.String("credential", "", "this task server's credential `file` (role taskserver; default: the client configuration's)")
	defaultUser := ""
	if os.Geteuid() == 0 {
		defaultUser = "nobody"
	}
	runAs := f.String("run-as", defaultUser, "OS `user` the task commands run as (needs root; default nobody when run as root)")
	workBase := f.String("work-base", os.TempDir(), "`directory` for the attempts' working directories")
	taskUIDs := f.String("task-uids", mrexec.DefaultUIDs, "`FIRST-LAST`: with -run-as, each attempt runs as a uid of this range (no account's) that no other attempt on this host uses meanwhile, and every process of that uid is killed when it ends; 'none': all as the -run-as account, where tasks can reach each other's processes")
	onlyUser := f.String("owner", "", "PlasmaFS `user` whose tasks a task server not run as root (or with -run-as '') runs, and nobody else's (default: the user of the client configuration's credential)")
	tokenFile := f.String("token-file", os.Getenv("PLASMAMR_TOKEN_FILE"), "`file` holding a token coordinators must present too (default $PLASMAMR_TOKEN_FILE)")
	adminAddr := adminFlag(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.pos) != 0 {
		return usagef("unexpected argument %q", f.pos[0])
	}
	token, err := readToken(*tokenFile)
	if err != nil {
		return err
	}
	var user *mrexec.TaskUser
	if *runAs != "" {
		if os.Geteuid() != 0 {
			return usagef("-run-as %s: only a task server running as root can run commands as another user", *runAs)
		}
		if user, err = mrexec.LookupTaskUser(*runAs, *workBase); err != nil {
			return err
		}
		if *taskUIDs != "none" {
			if user.UIDs, err = mrexec.ParseUIDRange(*taskUIDs); err != nil {
				return usagef("-task-uids: %v", err)
			}
		}
	}
	cfg, err := client.LoadConfig(f.cluster, f.namenodes)
	if err != nil {
		return err
	}
	ownerCred := cfg.CredentialFile // the user this server works for, if it cannot switch users
	if *credFile != "" {
		cfg.CredentialFile = *credFile
	}
	level := mrexec.TaskLevel(cfg.Security)
	owner := ""
	if user == nil && level != auth.None {
		if owner, err = taskServerOwner(*onlyUser, ownerCred); err != nil {
			return err
		}
	}
	if level != auth.None {
		if cfg.CredentialFile == "" {
			return usagef("a task server needs its own credential of role taskserver: -credential FILE (issue one with 'plasma admin user add NAME -taskserver')")
		}
		cred, err := auth.LoadCredential(cfg.CredentialFile)
		if err != nil {
			return fmt.Errorf("task server credential: %w", err)
		}
		if cred.Identity.Role != auth.RoleTaskServer {
			return usagef("-credential %s is of role %s, not taskserver (issue one with 'plasma admin user add NAME -taskserver')", cfg.CredentialFile, cred.Identity.Role)
		}
		cfg.Credential = cred
	}
	if host, _, err := net.SplitHostPort(*listen); level == auth.None && token == "" && (err != nil || !isLoopback(host)) {
		return usagef("-listen %s: at security level none, without -token-file a task server listens on a loopback address only", *listen)
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	w := mrexec.Worker{Name: ln.Addr().String()}
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
			return fmt.Errorf("-datanode %s: no datanode has that address", *dn)
		}
	}
	ts, err := mrexec.NewTaskServer(c, c.Credential(), w, *slots)
	if err != nil {
		return err
	}
	ts.Token, ts.User, ts.Owner = token, user, owner
	reqs := metrics.NewRequests("taskserver", "Requests of job coordinators, by route (info, task, other).")
	dm, err := startAdmin(adminAddr, "task server", c.Credential(), logger("warn"), reqs)
	if err != nil {
		return err
	}
	defer dm.Close()
	ts.OnRequest = reqs.Inc
	fmt.Fprintf(stdout, "%s\n", ln.Addr())
	return ts.Serve(ctx, ln)
}

// taskServerOwner is the only PlasmaFS user whose tasks a task server
// that runs commands as its own OS user may run: -owner, or the user of
// the client configuration's credential (credFile).
func taskServerOwner(flag, credFile string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if credFile != "" {
		if c, err := auth.LoadCredential(credFile); err == nil {
			return c.Identity.User, nil
		}
	}
	return "", usagef("a task server not run as root runs task commands as its own OS user, which could read its credential and other jobs' keys: " +
		"give -owner USER (the one PlasmaFS user whose tasks it runs), or run it as root")
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
