package mapred

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/mrexec"
)

// Attempt is the record of one task attempt, for the report.
type Attempt struct {
	Task    string
	Attempt int
	Worker  string
	Local   bool // ran where its input is (map tasks with a known datanode)
	Error   string
	Stderr  string
	Elapsed time.Duration
}

// Report describes a finished job, as the original's job report did, plus
// counters.
type Report struct {
	JobID, Name                string
	Input, Output, Work, Log   string
	Runners                    []string
	Status                     string // "successful", "failed" or "killed"
	Error                      string
	MapTasks, ReduceTasks      int
	SuccessfulTasks            int
	MisallocatedTasks          int
	InputFiles, NonLocalInputs int
	AvgRunningTasks            float64
	Wallclock                  time.Duration
	Attempts                   []Attempt
	FailedAttempts, Retries    int
	Counters                   Counters
	// JobCommits are the commits the job made itself; NamenodeCommits
	// what the namenode counted from start to end (all clients).
	JobCommits      int
	NamenodeCommits uint64
}

// Text renders the report.
func (r *Report) Text() string {
	var b strings.Builder
	p := func(k string, v any) { fmt.Fprintf(&b, "%-32s %v\n", k+":", v) }
	p("Job name", r.Name)
	p("Job ID", r.JobID)
	p("PlasmaFS input dir", r.Input)
	p("PlasmaFS output dir", r.Output)
	p("PlasmaFS work dir", r.Work)
	p("PlasmaFS log dir", path.Join(r.Log, r.JobID))
	p("Task runners", strings.Join(r.Runners, " "))
	p("Map tasks", r.MapTasks)
	p("Reduce tasks", r.ReduceTasks)
	p("Number successful tasks", r.SuccessfulTasks)
	p("Number misallocated tasks", r.MisallocatedTasks)
	p("Number input files", r.InputFiles)
	p("Number non-local input files", r.NonLocalInputs)
	p("Avg number of running tasks", fmt.Sprintf("%.6f", r.AvgRunningTasks))
	p("Wallclock runtime", fmt.Sprintf("%.6f seconds", r.Wallclock.Seconds()))
	p("Failed attempts", r.FailedAttempts)
	p("Retries", r.Retries)
	c := r.Counters
	p("Map input records", c.MapInRecords)
	p("Map input bytes", c.MapInBytes)
	p("Map output records", c.MapOutRecords)
	p("Map output bytes", c.MapOutBytes)
	p("Spills", c.Spills)
	if c.CombineIn > 0 {
		p("Combine input records", c.CombineIn)
		p("Combine output records", c.CombineOut)
	}
	p("Merge passes", c.MergePasses)
	p("Reduce input records", c.ReduceInRecords)
	p("Reduce input bytes", c.ReduceInBytes)
	p("Reduce output records", c.ReduceOutRecords)
	p("Reduce output bytes", c.ReduceOutBytes)
	p("Namenode commits by the job", r.JobCommits)
	p("Namenode commits (all clients)", r.NamenodeCommits)
	if secs := r.Wallclock.Seconds(); secs > 0 {
		p("Commits/second", fmt.Sprintf("%.2f", float64(r.JobCommits)/secs))
	}
	if r.Error != "" {
		p("Error", r.Error)
	}
	fmt.Fprintf(&b, "Job_status: %s\n", r.Status)
	return b.String()
}

// Counters count a job's records and bytes.
type Counters = mrexec.Counters

// Options of Run.
type Options struct {
	// Runners run the tasks: plasma's own commands set them (task
	// servers, internal/mrexec); none, as a job author leaves it, means
	// in-process slots (Job.LocalSlots).
	Runners []mrexec.Runner
	// Log receives progress lines.
	Log io.Writer
	// CredentialLifetime is how long the credential delegated to the
	// job's tasks on task servers stays valid (default
	// DefaultCredentialLifetime): a job that runs longer fails.
	CredentialLifetime time.Duration
}

// DefaultCredentialLifetime is the default Options.CredentialLifetime.
const DefaultCredentialLifetime = 24 * time.Hour

// delegatingRunner is a runner whose tasks carry the job's delegated
// credential.
type delegatingRunner interface{ NeedsDelegation() bool }

// delegate asks the namenode for the credential the job's tasks run with
// on task servers, if a runner needs one (nil otherwise).
func delegate(ctx context.Context, c *client.Client, runners []mrexec.Runner, job string, lifetime time.Duration) ([]byte, error) {
	for _, r := range runners {
		if d, ok := r.(delegatingRunner); ok && d.NeedsDelegation() {
			if lifetime <= 0 {
				lifetime = DefaultCredentialLifetime
			}
			cred, err := c.Delegate(ctx, job, lifetime)
			if err != nil {
				return nil, fmt.Errorf("a credential for the job's tasks on the task servers: %w", err)
			}
			return cred.PEM(), nil
		}
	}
	return nil, nil
}

func newJobID() string {
	var b [8]byte
	rand.Read(b[:])
	return "mr_" + hex.EncodeToString(b[:])
}

// taskState is a task's scheduling state.
type taskState struct {
	t        mrexec.Task
	node     string // preferred datanode
	attempts int
	avoid    string // the worker of the last failed attempt
	done     bool
	result   mrexec.Result
}

// scheduler hands tasks of one phase to runner slots.
type scheduler struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []*taskState
	running int
	left    int
	err     error
	live    map[string]bool // runners still taking tasks, by worker name
	nodes   map[string]bool // datanodes with a live runner
	nodeOf  map[string]string
	slots   map[string]int
	cancel  context.CancelFunc

	// running-task integral for the average
	lastChange time.Time
	area       float64
}

func (s *scheduler) noteRunning(delta int) {
	now := time.Now()
	s.area += float64(s.running) * now.Sub(s.lastChange).Seconds()
	s.lastChange = now
	s.running += delta
}

// next returns a task for a slot of w, nil when the phase is over.
func (s *scheduler) next(w mrexec.Worker) *taskState {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.err != nil || s.left == 0 || !s.live[w.Name] {
			return nil
		}
		pick := -1
		for i, ts := range s.pending {
			if w.Node != "" && ts.node == w.Node && (ts.avoid != w.Name || len(s.live) == 1) {
				pick = i
				break
			}
		}
		if pick < 0 {
			for i, ts := range s.pending {
				// Elsewhere first what has no home: tasks without a
				// preferred node or whose node has no live runner.
				if ts.node == "" || !s.nodes[ts.node] || (ts.avoid != "" && s.nodeOf[ts.avoid] == ts.node) {
					if ts.avoid != w.Name || len(s.live) == 1 {
						pick = i
						break
					}
				}
			}
		}
		if pick < 0 {
			// Then a task whose home has more waiting than slots: it
			// could not start there now anyway (so the imbalance a
			// datanode's share of the input causes is evened out without
			// giving up locality for tasks that will soon run at home).
			waiting := map[string]int{}
			for _, ts := range s.pending {
				waiting[ts.node]++
			}
			for i, ts := range s.pending {
				if (ts.avoid != w.Name || len(s.live) == 1) && waiting[ts.node] > s.slotsOn(ts.node) {
					pick = i
					break
				}
			}
		}
		if pick < 0 && s.running == 0 {
			for i, ts := range s.pending {
				if ts.avoid != w.Name || len(s.live) == 1 {
					pick = i
					break
				}
			}
		}
		if pick >= 0 {
			ts := s.pending[pick]
			s.pending = append(s.pending[:pick], s.pending[pick+1:]...)
			s.noteRunning(1)
			return ts
		}
		s.cond.Wait()
	}
}

// slotsOn counts the slots of the live runners paired with node.
func (s *scheduler) slotsOn(node string) int {
	n := 0
	for name := range s.live {
		if s.nodeOf[name] == node {
			n += s.slots[name]
		}
	}
	return n
}

// runJob runs job j, whose directories are all in PlasmaFS (Run), phase
// by phase: check the directories, create the job's own, plan the map
// tasks, run the maps, then the reduces, commit the output, and finish
// (clean up, report and log) whatever happened.
func runJob(ctx context.Context, c *client.Client, j Job, opt Options) (*Report, error) {
	j.Defaults()
	if err := j.Validate(); err != nil {
		return nil, err
	}
	// A kill request ('plasma mr kill') cancels ctx with ErrKilled.
	ctx, kill := context.WithCancelCause(ctx)
	defer kill(nil)
	r := newJobRun(c, j, opt)
	stats0, _ := clientx.NamenodeStats(ctx, c)
	if err := r.checkDirs(ctx); err != nil {
		return nil, err
	}
	if err := r.createDirs(ctx); err != nil {
		return nil, err
	}
	stopMonitor := monitor(ctx, c, kill, &r.mu, r.rep, r.st)
	maps, err := r.planMaps(ctx)
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err == nil {
		r.logf("Starting %d map tasks on %d runners", len(maps), len(r.runners))
		r.setPhase("map")
		err = r.runPhase(jctx, cancel, maps)
	}
	var reduces []*taskState
	if err == nil {
		reduces = r.reduceTasks(maps)
		r.logf("Map phase done; starting %d reduce tasks", len(reduces))
		r.setPhase("reduce")
		err = r.runPhase(jctx, cancel, reduces)
	}
	if err == nil {
		r.setPhase("commit")
		err = r.commitOutput(ctx, reduces)
	}
	stopMonitor()
	return r.finish(ctx, stats0, err)
}

// jobRun is one run of a job: its report and status (guarded by mu while
// phases run), and what the phases share.
type jobRun struct {
	c       *client.Client
	j       Job
	opt     Options
	runners []mrexec.Runner
	logf    func(format string, args ...any)
	start   time.Time
	id, dir string // the job's id and its directory in the work directory
	base    mrexec.Task

	mu  sync.Mutex
	rep *Report
	st  *Status

	area, busy float64         // integral of running tasks over the phases' time, and that time
	dead       map[string]bool // runners that died in an earlier phase
}

func newJobRun(c *client.Client, j Job, opt Options) *jobRun {
	logw := opt.Log
	if logw == nil {
		logw = io.Discard
	}
	r := &jobRun{c: c, j: j, opt: opt, runners: opt.Runners, start: time.Now(), id: newJobID(), dead: map[string]bool{}}
	r.logf = func(format string, args ...any) {
		fmt.Fprintf(logw, "[%s] [info] %s\n", time.Now().Format(time.DateTime), fmt.Sprintf(format, args...))
	}
	if len(r.runners) == 0 {
		r.runners = []mrexec.Runner{&mrexec.Local{C: c, N: j.LocalSlots}}
	}
	r.dir = path.Join(j.Work, r.id)
	r.rep = &Report{JobID: r.id, Name: j.Name, Input: j.Input, Output: j.Output, Work: j.Work, Log: j.Log}
	for _, rn := range r.runners {
		w := rn.Worker()
		r.rep.Runners = append(r.rep.Runners, fmt.Sprintf("%s(%d slots, datanode %q)", w.Name, rn.Slots(), w.Node))
	}
	return r
}

// checkDirs checks that the output does not exist and the input does.
func (r *jobRun) checkDirs(ctx context.Context) error {
	if _, err := r.c.Lookup(ctx, r.j.Output); err == nil {
		return fmt.Errorf("output %s exists", r.j.Output)
	} else if !errors.Is(err, client.ErrNotFound) {
		return err
	}
	if fi, err := r.c.Lookup(ctx, r.j.Input); err != nil {
		return fmt.Errorf("input: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("input %s is not a directory", r.j.Input)
	}
	return nil
}

// createDirs gets the tasks' delegated credential, if the runners need
// one, and creates the work and log directories, the job's own and its
// first status, in one transaction.
func (r *jobRun) createDirs(ctx context.Context) error {
	j, id, dir := r.j, r.id, r.dir
	cred, err := delegate(ctx, r.c, r.runners, id, r.opt.CredentialLifetime)
	if err != nil {
		return err
	}
	r.base = mrexec.Task{Job: id, Dir: dir, Partitions: j.Partitions, SortBuffer: j.SortBuffer, Credential: cred,
		JobName: j.Name, InputDir: j.Input, OutputDir: j.Output, LogDir: j.Log, BigblockSize: j.SplitSize}
	r.logf("Job %s (%s): planning", id, j.Name)
	host, _ := os.Hostname()
	r.st = &Status{JobID: id, Name: j.Name, State: StateRunning, Phase: "planning", Input: j.Input, Output: j.Output, Work: j.Work, Log: j.Log,
		ReduceTasks: j.Partitions, Host: host, PID: os.Getpid(), Started: r.start}
	err = r.c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		if _, err := tx.MkdirAll(ctx, j.Work, 0o755); err != nil {
			return err
		}
		if _, err := tx.MkdirAll(ctx, j.Log, 0o755); err != nil {
			return err
		}
		if _, err := tx.Mkdir(ctx, dir, 0o700); err != nil {
			return err
		}
		if _, err := tx.Mkdir(ctx, dir+"/tmp", 0o700); err != nil {
			return err
		}
		if _, err := tx.Mkdir(ctx, path.Join(j.Log, id), 0o755); err != nil {
			return err
		}
		return writeStatus(ctx, tx, r.st)
	})
	if err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	r.rep.JobCommits++
	return nil
}

// planMaps cuts the input into the map tasks, each preferring the
// datanode that holds most of its split. The tasks it could plan come
// back with the error of a file it could not.
func (r *jobRun) planMaps(ctx context.Context) ([]*taskState, error) {
	j := r.j
	ptx := r.c.Begin()
	splits, bs, err := planSplits(ctx, ptx, j.Input, j.SplitSize, func(file string) bool {
		f, _ := splitFormat(j, file)
		return f.Kind == FormatLengthPrefixed
	})
	ptx.Abort(ctx)
	if err != nil {
		err = fmt.Errorf("planning: %w", err)
	}
	if bs == 0 {
		if st, err := r.c.FsStat(ctx); err == nil {
			bs = int64(st.Blocksize)
		}
	}
	r.base.Blocksize = bs
	r.rep.MapTasks, r.rep.ReduceTasks = len(splits), j.Partitions
	r.mu.Lock()
	r.st.MapTasks = len(splits)
	r.mu.Unlock()
	var maps []*taskState
	for i, s := range splits {
		t := r.base
		t.Kind, t.Index, t.Command, t.Rep = "map", i, j.Map, j.Rep
		t.Combine, t.MapPartitions, t.ExtractMode = j.Combine, j.MapPartitions, j.ExtractMode
		t.Input, t.Start, t.End = s.File, s.Start, s.End
		f, ferr := splitFormat(j, s.File)
		if ferr != nil && err == nil {
			err = fmt.Errorf("planning: %w", ferr)
		}
		t.Format, t.RecordSize = f.Kind, f.Size
		maps = append(maps, &taskState{t: t, node: s.Node})
	}
	return maps, err
}

// reduceTasks are the reduce tasks, one per partition, each reading its
// partition of every map output.
func (r *jobRun) reduceTasks(maps []*taskState) []*taskState {
	var outs []string
	for _, m := range maps {
		outs = append(outs, m.result.Output)
	}
	var reduces []*taskState
	for p := 0; p < r.j.Partitions; p++ {
		t := r.base
		t.Kind, t.Index, t.Command, t.Rep, t.Inputs = "reduce", p, r.j.Reduce, r.j.OutputRep, outs
		reduces = append(reduces, &taskState{t: t})
	}
	return reduces
}

// runPhase runs tasks on the slots of the runners still alive until all
// succeeded or one failed for good (then cancel stops the others).
func (r *jobRun) runPhase(jctx context.Context, cancel context.CancelFunc, tasks []*taskState) error {
	s := &scheduler{pending: append([]*taskState(nil), tasks...), left: len(tasks), live: map[string]bool{}, nodes: map[string]bool{},
		nodeOf: map[string]string{}, slots: map[string]int{}, cancel: cancel, lastChange: time.Now()}
	s.cond = sync.NewCond(&s.mu)
	for _, rn := range r.runners {
		w := rn.Worker()
		if r.dead[w.Name] {
			continue
		}
		s.live[w.Name] = true
		s.slots[w.Name] = rn.Slots()
		s.nodeOf[w.Name] = w.Node
		if w.Node != "" {
			s.nodes[w.Node] = true
		}
	}
	phaseStart := time.Now()
	var wg sync.WaitGroup
	for _, rn := range r.runners {
		if r.dead[rn.Worker().Name] {
			continue
		}
		for range rn.Slots() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runSlot(jctx, s, rn, r.j, &r.mu, r.rep, r.logf)
			}()
		}
	}
	// Slots that end because their runner died leave the others.
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteRunning(0)
	for _, rn := range r.runners {
		if !s.live[rn.Worker().Name] {
			r.dead[rn.Worker().Name] = true
		}
	}
	r.area += s.area
	r.busy += time.Since(phaseStart).Seconds()
	if s.err == nil && s.left > 0 {
		s.err = errors.New("no live task runner left")
	}
	return s.err
}

func (r *jobRun) setPhase(p string) {
	r.mu.Lock()
	r.st.Phase = p
	r.mu.Unlock()
}

// commitOutput makes the output appear whole, in one transaction: the
// reduce outputs renamed to part files of a directory renamed to the
// job's output.
func (r *jobRun) commitOutput(ctx context.Context, reduces []*taskState) error {
	err := r.c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		out := r.dir + "/output"
		if _, err := tx.Mkdir(ctx, out, 0o755); err != nil {
			return err
		}
		for p, rt := range reduces {
			if err := tx.Rename(ctx, rt.result.Output, fmt.Sprintf("%s/part-%05d", out, p)); err != nil {
				return err
			}
		}
		if err := tx.Rename(ctx, out, r.j.Output); err != nil {
			return fmt.Errorf("output %s: %w", r.j.Output, err)
		}
		return nil
	})
	if err == nil {
		r.mu.Lock() // the monitor counts its status commits here too
		r.rep.JobCommits++
		r.mu.Unlock()
	}
	return err
}

// finish completes the report with how the job ended (err), removes the
// job's directory unless kept, and writes the report, the final status
// and the failed attempts' stderr to the log directory; it does so also
// for a job interrupted by the user (context.WithoutCancel), which
// leaves its logs and no garbage.
func (r *jobRun) finish(ctx context.Context, stats0 clientx.Stats, err error) (*Report, error) {
	rep, st := r.rep, r.st
	rep.Wallclock = time.Since(r.start)
	if r.busy > 0 {
		rep.AvgRunningTasks = r.area / r.busy
	}
	if err != nil && errors.Is(context.Cause(ctx), ErrKilled) {
		err = ErrKilled
		rep.Status, rep.Error = StateKilled, err.Error()
		r.logf("Job killed")
	} else if err != nil {
		rep.Status, rep.Error = "failed", err.Error()
		r.logf("Job failed: %v", err)
	} else {
		rep.Status = "successful"
		r.logf("Finished job")
	}
	cctx := context.WithoutCancel(ctx)
	if !r.j.KeepWork {
		if cerr := removeTree(cctx, r.c, r.dir); cerr != nil {
			r.logf("Removing %s: %v", r.dir, cerr)
		} else {
			rep.JobCommits++
		}
	}
	rep.JobCommits++ // the log commit below
	if stats1, serr := clientx.NamenodeStats(cctx, r.c); serr == nil {
		rep.NamenodeCommits = stats1.Commits - stats0.Commits + 1
	}
	st.State, st.Phase, st.Error = rep.Status, "done", rep.Error
	st.MapsDone, st.ReducesDone, st.FailedAttempts = doneTasks(rep)
	if lerr := writeLogs(cctx, r.c, r.j.Log, rep, st); lerr != nil {
		r.logf("Writing logs to %s: %v", r.j.Log, lerr)
		rep.JobCommits--
	}
	return rep, err
}

// runSlot runs tasks of s on r until the phase ends.
func runSlot(ctx context.Context, s *scheduler, r mrexec.Runner, j Job, mu *sync.Mutex, rep *Report, logf func(string, ...any)) {
	w := r.Worker()
	for {
		ts := s.next(w)
		if ts == nil {
			return
		}
		ts.attempts++
		t := ts.t
		t.Attempt = ts.attempts
		started := time.Now()
		res, err := r.Run(ctx, t)
		if err != nil && ctx.Err() == nil {
			res.Error = fmt.Sprintf("task runner %s: %v", w.Name, err)
		} else if err != nil {
			res.Error = err.Error()
		}
		a := Attempt{Task: t.Name(), Attempt: t.Attempt, Worker: w.Name, Error: res.Error, Stderr: res.Stderr, Elapsed: time.Since(started),
			Local: t.Kind == "map" && ts.node != "" && ts.node == w.Node}
		mu.Lock()
		rep.Attempts = append(rep.Attempts, a)
		rep.Counters.Add(res.Counters)
		rep.JobCommits += res.Commits
		rep.InputFiles += res.Inputs
		rep.NonLocalInputs += res.NonLocal
		if res.Error == "" {
			rep.SuccessfulTasks++
			if t.Kind == "map" && ts.node != "" && w.Node != "" && ts.node != w.Node {
				rep.MisallocatedTasks++
			}
		} else {
			rep.FailedAttempts++
		}
		mu.Unlock()

		dead := err != nil && ctx.Err() == nil && !r.Alive(ctx)
		s.mu.Lock()
		s.noteRunning(-1)
		switch {
		case res.Error == "":
			ts.done, ts.result = true, res
			s.left--
		case ctx.Err() != nil:
			if s.err == nil {
				s.err = ctx.Err()
			}
		case ts.attempts >= j.MaxAttempts:
			if s.err == nil {
				s.err = fmt.Errorf("%s failed %d times, last on %s: %s", t.Name(), ts.attempts, w.Name, res.Error)
			}
		default:
			logf("%s attempt %d failed on %s: %s (retrying)", t.Name(), t.Attempt, w.Name, res.Error)
			mu.Lock()
			rep.Retries++
			mu.Unlock()
			ts.avoid = w.Name
			s.pending = append(s.pending, ts)
		}
		if dead && s.live[w.Name] {
			logf("Task runner %s is gone", w.Name)
			delete(s.live, w.Name)
			s.nodes = map[string]bool{}
			for name := range s.live {
				if n := s.nodeOf[name]; n != "" {
					s.nodes[n] = true
				}
			}
		}
		if len(s.live) == 0 && s.left > 0 && s.err == nil {
			s.err = errors.New("no live task runner left")
		}
		if s.err != nil {
			s.cancel() // stop the other running attempts
		}
		s.mu.Unlock()
		s.cond.Broadcast()
		if dead {
			return
		}
	}
}

// removeTree deletes dir and everything below it in one transaction.
func removeTree(ctx context.Context, c *client.Client, dir string) error {
	return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		var rm func(string) error
		rm = func(d string) error {
			ents, err := tx.ReadDir(ctx, d)
			if err != nil {
				return err
			}
			for _, e := range ents {
				p := d + "/" + e.Name
				if e.Type == client.TypeDir {
					if err := rm(p); err != nil {
						return err
					}
					continue
				}
				if err := tx.Unlink(ctx, p); err != nil {
					return err
				}
			}
			return tx.Rmdir(ctx, d)
		}
		return rm(dir)
	})
}

// writeLogs writes LOG/JOBID/report and the standard error of every
// attempt that failed or wrote any, in one transaction.
func writeLogs(ctx context.Context, c *client.Client, logDir string, rep *Report, st *Status) error {
	atts := append([]Attempt(nil), rep.Attempts...)
	sort.Slice(atts, func(i, j int) bool {
		if atts[i].Task != atts[j].Task {
			return atts[i].Task < atts[j].Task
		}
		return atts[i].Attempt < atts[j].Attempt
	})
	return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		d := path.Join(logDir, rep.JobID)
		if _, err := tx.MkdirAll(ctx, d, 0o755); err != nil {
			return err
		}
		write := func(name, text string) error {
			f, err := tx.CreateFile(ctx, d+"/"+name, client.CreateOptions{})
			if err != nil {
				return err
			}
			if _, err := io.WriteString(f, text); err != nil {
				return err
			}
			return f.Close()
		}
		if err := write("report", rep.Text()); err != nil {
			return err
		}
		if err := writeStatus(ctx, tx, st); err != nil {
			return err
		}
		for _, a := range atts {
			if a.Error == "" && a.Stderr == "" {
				continue
			}
			text := a.Stderr
			if a.Error != "" {
				text = fmt.Sprintf("%s%s attempt %d on %s failed: %s\n", a.Stderr, a.Task, a.Attempt, a.Worker, a.Error)
			}
			if err := write(fmt.Sprintf("%s.a%d.stderr", a.Task, a.Attempt), text); err != nil {
				return err
			}
		}
		return nil
	})
}
