package mr

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// plasma mr status, list and kill against clusters of real processes.

// blockedJob is a 'plasma mr run' whose map attempts wait for a release
// file; the first to start records its shell's process id.
type blockedJob struct {
	cmd     *exec.Cmd
	out     *bytes.Buffer
	id      string
	release string
	pidFile string
	exited  chan error
}

var mrListRunning = regexp.MustCompile(`(?m)^(mr_[0-9a-f]+)\s+running\s`)

// startBlockedJob starts a word count into output (log directory /log)
// and waits until a map attempt runs and 'mr list' shows the job running.
func startBlockedJob(t *testing.T, c *clustertest.Procs, output string) *blockedJob {
	t.Helper()
	dir := t.TempDir()
	j := &blockedJob{release: filepath.Join(dir, "release"), pidFile: filepath.Join(dir, "pid"), out: &bytes.Buffer{}, exited: make(chan error, 1)}
	mark := filepath.Join(dir, "mark")
	mapper := fmt.Sprintf(`if mkdir %s 2>/dev/null; then echo $$ > %s.tmp && mv %s.tmp %s; fi; while [ ! -e %s ]; do sleep 0.01; done; %s`,
		mark, j.pidFile, j.pidFile, j.pidFile, j.release, testkit.MRWordMapper)
	j.cmd = exec.Command(c.Bin, "mr", "run", "-input", "/in", "-output", output, "-work", "/work", "-log", "/log",
		"-map", mapper, "-reduce", testkit.MRCountReducer, "-partitions", "2", "-split-size", "64K")
	j.cmd.Env = c.Env()
	j.cmd.Stdout, j.cmd.Stderr = j.out, j.out
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { j.exited <- j.cmd.Wait() }()
	t.Cleanup(func() { os.WriteFile(j.release, nil, 0o644); j.cmd.Process.Kill(); <-j.exited; j.exited <- nil })
	testkit.AwaitCond(t, 2*time.Minute, "no map attempt started", func() bool {
		_, err := os.Stat(j.pidFile)
		return err == nil
	})
	testkit.AwaitCond(t, time.Minute, "mr list shows no running job", func() bool {
		out, _ := c.Run(nil, "mr", "list", "-log", "/log")
		if m := mrListRunning.FindStringSubmatch(out); m != nil {
			j.id = m[1]
			return true
		}
		return false
	})
	return j
}

func (j *blockedJob) wait(t *testing.T) (string, int) {
	t.Helper()
	select {
	case <-j.exited:
	case <-time.After(5 * time.Minute):
		t.Fatalf("mr run did not end:\n%s", j.out)
	}
	j.exited <- nil // for the cleanup
	return j.out.String(), j.cmd.ProcessState.ExitCode()
}

// attemptPID is the process id of the first map attempt's shell.
func (j *blockedJob) attemptPID(t *testing.T) int {
	b, _ := os.ReadFile(j.pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("attempt pid file: %q", b)
	}
	return pid
}

func statusField(t *testing.T, status, field string) string {
	t.Helper()
	return testkit.ReportValue(t, status, field)
}

// TestMRStatusList: while a job runs, 'mr list' shows it running and 'mr
// status' its phase (map) and progress; once it ends both show it
// successful with every task done. A job without -log is in the default
// log directory, which 'mr list' and 'mr status' read by default.
func TestMRStatusList(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	files := map[string][]byte{"a": testkit.MRText(31, 1500)}
	testkit.MRPut(t, c, "/in", files)
	j := startBlockedJob(t, c, "/out")
	testkit.AwaitCond(t, time.Minute, "mr status does not show the map phase", func() bool {
		out, code := c.Run(nil, "mr", "status", "-log", "/log", j.id)
		return code == 0 && strings.Contains(out, "running") && regexp.MustCompile(`(?m)^Phase:\s+map$`).MatchString(out)
	})
	st := c.MustRun("mr", "status", "-log", "/log", j.id)
	t.Logf("mr status while running:\n%s", st)
	if v := statusField(t, st, "Coordinator"); !strings.HasSuffix(v, fmt.Sprintf(" pid %d", j.cmd.Process.Pid)) {
		t.Fatalf("coordinator %q, not mr run's pid %d", v, j.cmd.Process.Pid)
	}
	maps := testkit.ReportValue(t, st, "Map tasks")
	if !regexp.MustCompile(`^\d+/[1-9]\d* done$`).MatchString(maps) {
		t.Fatalf("map tasks %q", maps)
	}
	os.WriteFile(j.release, nil, 0o644)
	out, code := j.wait(t)
	if code != 0 {
		t.Fatalf("mr run: exit %d:\n%s", code, out)
	}
	testkit.SameLines(t, mrOutput(t, c, "/out", 2, uniqKey), testkit.LocalCount(t, files))
	st = c.MustRun("mr", "status", "-log", "/log", j.id)
	t.Logf("mr status after the end:\n%s", st)
	if v := statusField(t, st, "State"); v != "successful" {
		t.Fatalf("state %q", v)
	}
	n := testkit.ReportValue(t, out, "Map tasks")
	if v := statusField(t, st, "Map tasks"); v != n+"/"+n+" done" {
		t.Fatalf("map tasks %q, want all %s done", v, n)
	}
	if v := statusField(t, st, "Reduce tasks"); v != "2/2 done" {
		t.Fatalf("reduce tasks %q", v)
	}
	list := c.MustRun("mr", "list", "-log", "/log")
	if !regexp.MustCompile(`(?m)^` + j.id + `\s+successful\s+done\s+` + n + `/` + n + `\s+2/2\s`).MatchString(list) {
		t.Fatalf("mr list:\n%s", list)
	}

	// The default log directory.
	out, code = c.Run(nil, "mr", "run", "-input", "/in", "-output", "/out-default", "-work", "/work", "-map", testkit.MRWordMapper, "-reduce", testkit.MRCountReducer)
	if code != 0 {
		t.Fatalf("mr run without -log: exit %d:\n%s", code, out)
	}
	id := mrJobID.FindStringSubmatch(out)[1]
	if list := c.MustRun("mr", "list"); !strings.Contains(list, id) || strings.Contains(list, j.id) {
		t.Fatalf("mr list (default log directory) does not list %s alone:\n%s", id, list)
	}
	if st := c.MustRun("mr", "status", id); statusField(t, st, "State") != "successful" {
		t.Fatalf("mr status %s:\n%s", id, st)
	}
	if out, code := c.Run(nil, "mr", "status", "mr_0000000000000000"); code != 1 || !strings.Contains(out, "no status") {
		t.Fatalf("status of an unknown job: exit %d: %s", code, out)
	}
}

// TestMRKill: 'mr kill' stops a running job: mr run ends with exit status
// 1 and Job_status killed, its map attempt's command is gone, there is no
// output directory, the work directory is empty and 'mr status' says
// killed (exit status 1). Killing it again says it has ended.
func TestMRKill(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	testkit.MRPut(t, c, "/in", map[string][]byte{"a": testkit.MRText(32, 1500)})
	j := startBlockedJob(t, c, "/out")
	attempt := j.attemptPID(t)
	out := c.MustRun("mr", "kill", "-log", "/log", j.id)
	if !strings.Contains(out, "killed") {
		t.Fatalf("mr kill: %s", out)
	}
	runOut, code := j.wait(t)
	t.Logf("mr run:\n%s", runOut)
	if code != 1 {
		t.Fatalf("killed mr run: exit %d, want 1", code)
	}
	if v := testkit.ReportValue(t, runOut, "Job_status"); v != "killed" {
		t.Fatalf("Job_status %q", v)
	}
	testkit.AwaitCond(t, time.Minute, "the killed job's map command still runs", func() bool { return !testkit.ProcessRunning(attempt) })
	if _, code := c.Run(nil, "ls", "/out"); code == 0 {
		t.Fatal("a killed job left an output directory")
	}
	if ls := strings.TrimSpace(c.MustRun("ls", "/work")); ls != "" {
		t.Fatalf("work directory not empty after the kill: %q", ls)
	}
	st, code := c.Run(nil, "mr", "status", "-log", "/log", j.id)
	if code != 1 || statusField(t, st, "State") != "killed" {
		t.Fatalf("mr status after the kill: exit %d:\n%s", code, st)
	}
	if out, code := c.Run(nil, "mr", "kill", "-log", "/log", j.id); code != 1 || !strings.Contains(out, "already ended") {
		t.Fatalf("second kill: exit %d: %s", code, out)
	}
	if rep := plasmaCat(t, c, "/log/"+j.id+"/report"); !strings.Contains(rep, "Job_status: killed") {
		t.Fatalf("report in the log directory:\n%s", rep)
	}
}

// TestMRKillOrphan: a job whose coordinator was killed (SIGKILL) stays
// "running" in its status; 'mr kill' on the same host finds the
// coordinator gone, removes the job's work directory and records the job
// as killed.
func TestMRKillOrphan(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	testkit.MRPut(t, c, "/in", map[string][]byte{"a": testkit.MRText(33, 1500)})
	j := startBlockedJob(t, c, "/out")
	j.cmd.Process.Signal(syscall.SIGKILL)
	j.wait(t)
	if ls := strings.TrimSpace(c.MustRun("ls", "/work")); ls != j.id {
		t.Fatalf("work directory of the orphaned job: %q", ls)
	}
	out := c.MustRun("mr", "kill", "-log", "/log", j.id)
	if !strings.Contains(out, "killed") {
		t.Fatalf("mr kill: %s", out)
	}
	if ls := strings.TrimSpace(c.MustRun("ls", "/work")); ls != "" {
		t.Fatalf("work directory not empty after the kill: %q", ls)
	}
	if _, code := c.Run(nil, "ls", "/out"); code == 0 {
		t.Fatal("output directory after the kill")
	}
	st, _ := c.Run(nil, "mr", "status", "-log", "/log", j.id)
	if statusField(t, st, "State") != "killed" || !strings.Contains(statusField(t, st, "Error"), "coordinator") {
		t.Fatalf("mr status:\n%s", st)
	}
}
