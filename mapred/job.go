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

// runJob runs job j, whose directories are all in PlasmaFS (Run).
func runJob(ctx context.Context, c *client.Client, j Job, opt Options) (*Report, error) {
	j.Defaults()
	if err := j.Validate(); err != nil {
		return nil, err
	}
	logw := opt.Log
	if logw == nil {
		logw = io.Discard
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "[%s] [info] %s\n", time.Now().Format(time.DateTime), fmt.Sprintf(format, args...))
	}
	runners := opt.Runners
	if len(runners) == 0 {
		runners = []mrexec.Runner{&mrexec.Local{C: c, N: j.LocalSlots}}
	}
	start := time.Now()
	id := newJobID()
	dir := path.Join(j.Work, id)
	// A kill request ('plasma mr kill') cancels ctx with ErrKilled.
	ctx, kill := context.WithCancelCause(ctx)
	defer kill(nil)
	rep := &Report{JobID: id, Name: j.Name, Input: j.Input, Output: j.Output, Work: j.Work, Log: j.Log}
	for _, r := range runners {
		w := r.Worker()
		rep.Runners = append(rep.Runners, fmt.Sprintf("%s(%d slots, datanode %q)", w.Name, r.Slots(), w.Node))
	}
	stats0, _ := c.NamenodeStats(ctx)

	// Checking: the output must not exist; the input must.
	if _, err := c.Lookup(ctx, j.Output); err == nil {
		return nil, fmt.Errorf("output %s exists", j.Output)
	} else if !errors.Is(err, client.ErrNotFound) {
		return nil, err
	}
	if fi, err := c.Lookup(ctx, j.Input); err != nil {
		return nil, fmt.Errorf("input: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("input %s is not a directory", j.Input)
	}
	cred, err := delegate(ctx, c, runners, id, opt.CredentialLifetime)
	if err != nil {
		return nil, err
	}
	logf("Job %s (%s): planning", id, j.Name)
	host, _ := os.Hostname()
	st := &Status{JobID: id, Name: j.Name, State: StateRunning, Phase: "planning", Input: j.Input, Output: j.Output, Work: j.Work, Log: j.Log,
		ReduceTasks: j.Partitions, Host: host, PID: os.Getpid(), Started: start}
	err = c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
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
		return writeStatus(ctx, tx, st)
	})
	if err != nil {
		return nil, fmt.Errorf("work directory: %w", err)
	}
	rep.JobCommits++
	var mu sync.Mutex // guards rep and st while phases run
	stopMonitor := monitor(ctx, c, kill, &mu, rep, st)
	ptx, _ := c.Begin(ctx)
	splits, bs, err := planSplits(ctx, ptx, j.Input, j.SplitSize, func(file string) bool {
		f, _ := splitFormat(j, file)
		return f.Kind == FormatLengthPrefixed
	})
	ptx.Abort(ctx)
	if err != nil {
		err = fmt.Errorf("planning: %w", err)
	}
	if bs == 0 {
		if st, err := c.FsStat(ctx); err == nil {
			bs = int64(st.Blocksize)
		}
	}
	rep.MapTasks, rep.ReduceTasks = len(splits), j.Partitions
	mu.Lock()
	st.MapTasks = len(splits)
	mu.Unlock()

	base := mrexec.Task{Job: id, Dir: dir, Partitions: j.Partitions, SortBuffer: j.SortBuffer, Blocksize: bs, Credential: cred,
		JobName: j.Name, InputDir: j.Input, OutputDir: j.Output, LogDir: j.Log, BigblockSize: j.SplitSize}
	var maps []*taskState
	for i, s := range splits {
		t := base
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
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var area, busy float64
	dead := map[string]bool{} // runners that died in an earlier phase
	phase := func(tasks []*taskState) error {
		s := &scheduler{pending: append([]*taskState(nil), tasks...), left: len(tasks), live: map[string]bool{}, nodes: map[string]bool{},
			nodeOf: map[string]string{}, slots: map[string]int{}, cancel: cancel, lastChange: time.Now()}
		s.cond = sync.NewCond(&s.mu)
		for _, r := range runners {
			w := r.Worker()
			if dead[w.Name] {
				continue
			}
			s.live[w.Name] = true
			s.slots[w.Name] = r.Slots()
			s.nodeOf[w.Name] = w.Node
			if w.Node != "" {
				s.nodes[w.Node] = true
			}
		}
		phaseStart := time.Now()
		var wg sync.WaitGroup
		slots := 0
		for _, r := range runners {
			if dead[r.Worker().Name] {
				continue
			}
			for range r.Slots() {
				slots++
				wg.Add(1)
				go func() {
					defer wg.Done()
					runSlot(jctx, s, r, j, &mu, rep, logf)
				}()
			}
		}
		// Slots that end because their runner died leave the others.
		wg.Wait()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.noteRunning(0)
		for _, r := range runners {
			if !s.live[r.Worker().Name] {
				dead[r.Worker().Name] = true
			}
		}
		area += s.area
		busy += time.Since(phaseStart).Seconds()
		if s.err == nil && s.left > 0 {
			s.err = errors.New("no live task runner left")
		}
		return s.err
	}
	setPhase := func(p string) {
		mu.Lock()
		st.Phase = p
		mu.Unlock()
	}
	if err == nil {
		logf("Starting %d map tasks on %d runners", len(maps), len(runners))
		setPhase("map")
		err = phase(maps)
	}
	var reduces []*taskState
	if err == nil {
		var outs []string
		for _, m := range maps {
			outs = append(outs, m.result.Output)
		}
		for p := 0; p < j.Partitions; p++ {
			t := base
			t.Kind, t.Index, t.Command, t.Rep, t.Inputs = "reduce", p, j.Reduce, j.OutputRep, outs
			reduces = append(reduces, &taskState{t: t})
		}
		logf("Map phase done; starting %d reduce tasks", len(reduces))
		setPhase("reduce")
		err = phase(reduces)
	}
	if err == nil {
		setPhase("commit")
		// The output appears whole, in one transaction.
		err = c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			out := dir + "/output"
			if _, err := tx.Mkdir(ctx, out, 0o755); err != nil {
				return err
			}
			for p, r := range reduces {
				if err := tx.Rename(ctx, r.result.Output, fmt.Sprintf("%s/part-%05d", out, p)); err != nil {
					return err
				}
			}
			if err := tx.Rename(ctx, out, j.Output); err != nil {
				return fmt.Errorf("output %s: %w", j.Output, err)
			}
			return nil
		})
		if err == nil {
			mu.Lock() // the monitor counts its status commits here too
			rep.JobCommits++
			mu.Unlock()
		}
	}
	stopMonitor()
	rep.Wallclock = time.Since(start)
	if busy > 0 {
		rep.AvgRunningTasks = area / busy
	}
	if err != nil && errors.Is(context.Cause(ctx), ErrKilled) {
		err = ErrKilled
		rep.Status, rep.Error = StateKilled, err.Error()
		logf("Job killed")
	} else if err != nil {
		rep.Status, rep.Error = "failed", err.Error()
		logf("Job failed: %v", err)
	} else {
		rep.Status = "successful"
		logf("Finished job")
	}
	// Clean up and write the logs (with context.WithoutCancel: a job
	// interrupted by the user still leaves its logs and no garbage).
	cctx := context.WithoutCancel(ctx)
	if !j.KeepWork {
		if cerr := removeTree(cctx, c, dir); cerr != nil {
			logf("Removing %s: %v", dir, cerr)
		} else {
			rep.JobCommits++
		}
	}
	rep.JobCommits++ // the log commit below
	if stats1, serr := c.NamenodeStats(cctx); serr == nil {
		rep.NamenodeCommits = stats1.Commits - stats0.Commits + 1
	}
	st.State, st.Phase, st.Error = rep.Status, "done", rep.Error
	st.MapsDone, st.ReducesDone, st.FailedAttempts = doneTasks(rep)
	if lerr := writeLogs(cctx, c, j.Log, rep, st); lerr != nil {
		logf("Writing logs to %s: %v", j.Log, lerr)
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
