package mapred

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/plasmafs/plasma/client"
)

// A job's state is kept in PlasmaFS, in LOG/JOBID/status: written by the
// coordinator when the job starts, when a phase starts (noticed within
// KillPoll), at most every StatusInterval while tasks finish, and when the
// job ends. 'plasma mr
// kill' asks the coordinator to stop by creating LOG/JOBID/kill, which the
// coordinator looks for every KillPoll; a job that is killed commits no
// output and removes its work directory.

// DefaultLog is the log directory of jobs that name none.
const DefaultLog = "/mapred/log"

// Job states.
const (
	StateRunning    = "running"
	StateSuccessful = "successful"
	StateFailed     = "failed"
	StateKilled     = "killed"
)

var (
	// StatusInterval is the least time between two progress updates of
	// a job's status file (each is a commit).
	StatusInterval = 2 * time.Second
	// KillPoll is how often a coordinator looks for a kill request.
	KillPoll = 200 * time.Millisecond
)

// ErrKilled is the cause of a job stopped by a kill request.
var ErrKilled = errors.New("job killed ('plasma mr kill')")

// Status is a job's state as LOG/JOBID/status records it.
type Status struct {
	JobID, Name              string
	State                    string // running, successful, failed, killed
	Phase                    string // planning, map, reduce, commit, done
	Input, Output, Work, Log string
	MapTasks, MapsDone       int
	ReduceTasks, ReducesDone int
	FailedAttempts           int
	Host                     string // the coordinator's host and process id
	PID                      int
	Started, Updated         time.Time
	Error                    string
}

// Text renders s as "Key: value" lines.
func (s *Status) Text() string {
	var b strings.Builder
	p := func(k string, v any) { fmt.Fprintf(&b, "%-16s %v\n", k+":", v) }
	p("Job ID", s.JobID)
	p("Job name", s.Name)
	p("State", s.State)
	p("Phase", s.Phase)
	p("Map tasks", fmt.Sprintf("%d/%d done", s.MapsDone, s.MapTasks))
	p("Reduce tasks", fmt.Sprintf("%d/%d done", s.ReducesDone, s.ReduceTasks))
	p("Failed attempts", s.FailedAttempts)
	p("Input", s.Input)
	p("Output", s.Output)
	p("Work", s.Work)
	p("Log", s.Log)
	p("Coordinator", fmt.Sprintf("%s pid %d", s.Host, s.PID))
	p("Started", s.Started.UTC().Format(time.RFC3339))
	p("Updated", s.Updated.UTC().Format(time.RFC3339))
	if s.Error != "" {
		p("Error", strings.ReplaceAll(s.Error, "\n", " "))
	}
	return b.String()
}

// ParseStatus parses a status file's text.
func ParseStatus(text string) (*Status, error) {
	s := &Status{}
	done := func(v string, n, total *int) {
		fmt.Sscanf(v, "%d/%d", n, total)
	}
	for _, l := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Job ID":
			s.JobID = v
		case "Job name":
			s.Name = v
		case "State":
			s.State = v
		case "Phase":
			s.Phase = v
		case "Map tasks":
			done(v, &s.MapsDone, &s.MapTasks)
		case "Reduce tasks":
			done(v, &s.ReducesDone, &s.ReduceTasks)
		case "Failed attempts":
			s.FailedAttempts, _ = strconv.Atoi(v)
		case "Input":
			s.Input = v
		case "Output":
			s.Output = v
		case "Work":
			s.Work = v
		case "Log":
			s.Log = v
		case "Coordinator":
			fmt.Sscanf(v, "%s pid %d", &s.Host, &s.PID)
		case "Started":
			s.Started, _ = time.Parse(time.RFC3339, v)
		case "Updated":
			s.Updated, _ = time.Parse(time.RFC3339, v)
		case "Error":
			s.Error = v
		}
	}
	if s.JobID == "" || s.State == "" {
		return nil, errors.New("not a job status file")
	}
	return s, nil
}

// writeStatus replaces LOG/JOBID/status in tx.
func writeStatus(ctx context.Context, tx *client.Txn, s *Status) error {
	s.Updated = time.Now()
	p := path.Join(s.Log, s.JobID, "status")
	if err := tx.Unlink(ctx, p); err != nil && !errors.Is(err, client.ErrNotFound) {
		return err
	}
	f, err := tx.CreateFile(ctx, p, client.CreateOptions{})
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, s.Text()); err != nil {
		return err
	}
	return f.Close()
}

// ReadStatus reads the status of job id in log directory logDir.
func ReadStatus(ctx context.Context, c *client.Client, logDir, id string) (*Status, error) {
	if strings.Contains(id, "/") || id == "" || id == "." || id == ".." {
		return nil, fmt.Errorf("%q: not a job id", id)
	}
	tx := c.Begin()
	defer tx.Abort(ctx)
	return readStatus(ctx, tx, logDir, id)
}

func readStatus(ctx context.Context, tx *client.Txn, logDir, id string) (*Status, error) {
	f, err := tx.Open(ctx, path.Join(logDir, id, "status"))
	if errors.Is(err, client.ErrNotFound) {
		return nil, fmt.Errorf("job %s: no status in %s: %w", id, logDir, err)
	}
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		return nil, err
	}
	s, err := ParseStatus(b.String())
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	return s, nil
}

// ListJobs returns the status of every job in log directory logDir, the
// latest started first.
func ListJobs(ctx context.Context, c *client.Client, logDir string) ([]*Status, error) {
	tx := c.Begin()
	defer tx.Abort(ctx)
	ents, err := tx.ReadDir(ctx, logDir)
	if err != nil {
		return nil, err
	}
	var out []*Status
	for _, e := range ents {
		if e.Type != client.TypeDir {
			continue
		}
		s, err := readStatus(ctx, tx, logDir, e.Name)
		if err != nil {
			continue // not a job's directory
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Started.Equal(out[j].Started) {
			return out[i].Started.After(out[j].Started)
		}
		return out[i].JobID < out[j].JobID
	})
	return out, nil
}

// Kill asks the coordinator of job id to stop it and waits until the job
// has ended (its status is no longer running); it returns the final
// status. A job whose coordinator ran on this host and is gone is cleaned
// up here: its work directory removed, its status set to killed. wait
// bounds the wait for another host's coordinator.
func Kill(ctx context.Context, c *client.Client, logDir, id string, wait time.Duration) (*Status, error) {
	s, err := ReadStatus(ctx, c, logDir, id)
	if err != nil {
		return nil, err
	}
	if s.State != StateRunning {
		return s, fmt.Errorf("job %s has already ended: %s", id, s.State)
	}
	err = c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.CreateFile(ctx, path.Join(logDir, id, "kill"), client.CreateOptions{})
		if errors.Is(err, client.ErrExists) {
			return nil
		}
		if err != nil {
			return err
		}
		host, _ := os.Hostname()
		fmt.Fprintf(f, "kill requested by %s pid %d at %s\n", host, os.Getpid(), time.Now().UTC().Format(time.RFC3339))
		return f.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("job %s: kill request: %w", id, err)
	}
	deadline := time.Now().Add(wait)
	for {
		s, err := ReadStatus(ctx, c, logDir, id)
		if err != nil {
			return nil, err
		}
		if s.State != StateRunning {
			return s, nil
		}
		if coordinatorGone(s) {
			return s, cleanUpOrphan(ctx, c, s)
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("job %s: its coordinator (%s pid %d) did not stop it within %v", id, s.Host, s.PID, wait)
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(KillPoll):
		}
	}
}

// coordinatorGone says whether s's coordinator ran on this host and its
// process no longer runs.
func coordinatorGone(s *Status) bool {
	host, _ := os.Hostname()
	if s.Host != host || s.PID <= 0 {
		return false
	}
	if s.PID == os.Getpid() {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.PID))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: a zombie has ended.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z'
	}
	return false
}

// cleanUpOrphan removes the work directory of a job whose coordinator is
// gone and records it as killed.
func cleanUpOrphan(ctx context.Context, c *client.Client, s *Status) error {
	if s.Work != "" {
		if err := removeTree(ctx, c, path.Join(s.Work, s.JobID)); err != nil && !errors.Is(err, client.ErrNotFound) {
			return fmt.Errorf("job %s: remove its work directory: %w", s.JobID, err)
		}
	}
	s.State, s.Phase = StateKilled, "done"
	s.Error = fmt.Sprintf("%v; its coordinator (pid %d) was gone, its work directory removed by the kill", ErrKilled, s.PID)
	return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return writeStatus(ctx, tx, s) })
}

// doneTasks counts the successful map and reduce attempts and the failed
// attempts of rep.
func doneTasks(rep *Report) (maps, reduces, failed int) {
	for _, a := range rep.Attempts {
		switch {
		case a.Error != "":
			failed++
		case strings.HasPrefix(a.Task, "map-"):
			maps++
		case strings.HasPrefix(a.Task, "reduce-"):
			reduces++
		}
	}
	return maps, reduces, failed
}

// monitor looks for a kill request of the job st describes (and calls
// kill with ErrKilled when there is one) and keeps its status file up to
// date while it runs; mu guards rep and st. The returned function stops
// it and waits for it.
func monitor(ctx context.Context, c *client.Client, kill context.CancelCauseFunc, mu *sync.Mutex, rep *Report, st *Status) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	killFile := path.Join(st.Log, st.JobID, "kill")
	mu.Lock()
	phase := st.Phase
	mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(KillPoll)
		defer t.Stop()
		written := ""
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := c.Lookup(ctx, killFile); err == nil {
				kill(ErrKilled)
				return
			}
			mu.Lock()
			newPhase := st.Phase != phase
			mu.Unlock()
			// A new phase is recorded at once, progress at most every
			// StatusInterval.
			if !newPhase && time.Since(last) < StatusInterval {
				continue
			}
			mu.Lock()
			st.MapsDone, st.ReducesDone, st.FailedAttempts = doneTasks(rep)
			cp := *st
			mu.Unlock()
			phase = cp.Phase
			cp.Updated = time.Time{}
			if text := cp.Text(); text != written {
				if err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return writeStatus(ctx, tx, &cp) }); err == nil {
					written = text
					mu.Lock()
					rep.JobCommits++
					mu.Unlock()
				}
			}
			last = time.Now()
		}
	}()
	return func() {
		close(stop)
		<-done
	}
}
