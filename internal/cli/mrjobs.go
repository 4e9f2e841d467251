package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/connlimit"
	"github.com/plasmafs/plasma/mapred"
)

// plasma mr status/list/kill: jobs as their status files in the log
// directory record them.
func init() {
	register("mr status", "[-log DIR] JOBID", "show a MapReduce job's state and progress", cmdMRStatus)
	register("mr list", "[-log DIR]", "list the MapReduce jobs of a log directory", cmdMRList)
	register("mr kill", "[-log DIR] JOBID", "stop a running MapReduce job (no output; its work directory removed)", cmdMRKill)
	register("mr web", "[-listen HOST:PORT] [-log DIR]", "serve a read-only web view of the MapReduce jobs (progress, counters, reports)", cmdMRWeb)
}

const mrLogUsage = "the jobs' PlasmaFS log `DIR`ectory"

func cmdMRStatus(ctx context.Context, args []string) error {
	f := newFlags("mr status", "[-log DIR] JOBID",
		`Show a job's state (running, successful, failed or killed), its phase and how many of
its tasks are done, from LOG/JOBID/status, which the job's coordinator keeps up to date
(every few seconds while tasks finish). Exit status 1 if the job failed or was killed.`, true)
	logDir := f.String("log", mapred.DefaultLog, mrLogUsage)
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.pos) != 1 {
		return usagef("one job id")
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := mapred.ReadStatus(ctx, c, *logDir, f.pos[0])
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, s.Text())
	if s.State == mapred.StateFailed || s.State == mapred.StateKilled {
		return exitStatus(1)
	}
	return nil
}

func cmdMRList(ctx context.Context, args []string) error {
	f := newFlags("mr list", "[-log DIR]",
		`List the jobs whose status is in the log directory, the latest started first: job id,
state, phase, map and reduce tasks done, start time and name.`, true)
	logDir := f.String("log", mapred.DefaultLog, mrLogUsage)
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.pos) != 0 {
		return usagef("unexpected argument %q", f.pos[0])
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	jobs, err := mapred.ListJobs(ctx, c, *logDir)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB ID\tSTATE\tPHASE\tMAPS\tREDUCES\tSTARTED\tNAME")
	for _, s := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d/%d\t%s\t%s\n", s.JobID, s.State, s.Phase, s.MapsDone, s.MapTasks, s.ReducesDone, s.ReduceTasks,
			s.Started.Local().Format(time.DateTime), escapeText(s.Name))
	}
	return tw.Flush()
}

func cmdMRKill(ctx context.Context, args []string) error {
	f := newFlags("mr kill", "[-log DIR] JOBID",
		`Stop a running job: its coordinator ('plasma mr run') stops its task attempts, commits
no output, removes its work directory and records it as killed, which this command waits
for. If the coordinator ran on this host and is gone, this command removes the work directory
and records the job as killed itself.`, true)
	logDir := f.String("log", mapred.DefaultLog, mrLogUsage)
	wait := f.Duration("wait", 2*time.Minute, "how long to wait for the coordinator to stop the job")
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.pos) != 1 {
		return usagef("one job id")
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := mapred.Kill(ctx, c, *logDir, f.pos[0], *wait)
	if err != nil {
		return err
	}
	if s.State != mapred.StateKilled {
		return fmt.Errorf("job %s ended %s before it was killed", s.JobID, s.State)
	}
	fmt.Fprintf(stdout, "job %s killed\n", s.JobID)
	return nil
}

func cmdMRWeb(ctx context.Context, args []string) error {
	f := newFlags("mr web", "[-listen HOST:PORT] [-log DIR]",
		`Serve a read-only web view of the jobs of a log directory: / lists them (state, phase,
progress), /job/JOBID shows one with its report once it has ended; /jobs.json and
/job/JOBID.json give the same as JSON. It reads the status files in PlasmaFS, so it shows
the jobs of every coordinator. The first line printed is the address it listens on.`, true)
	logDir := f.String("log", mapred.DefaultLog, mrLogUsage)
	listen := f.String("listen", "127.0.0.1:8766", "address to listen on")
	return withClient(ctx, f, args, 0, 0, func(c *client.Client) error {
		l, err := net.Listen("tcp", *listen)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "http://%s/\n", l.Addr())
		srv := &http.Server{Handler: mapred.WebHandler(c, *logDir), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			srv.Close()
		}()
		if err := connlimit.ServeHTTP(srv, l, connlimit.Options{Name: "mr web"}); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
}
