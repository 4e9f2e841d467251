package mr

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Streaming MapReduce ('plasma mr') against clusters of real processes.

// mrOutput reads the part files of dir, checking that each is sorted by
// key (byte order) when sortedKeys is set, and returns their lines.
func mrOutput(t *testing.T, c *clustertest.Procs, dir string, parts int, key func(string) string) []string {
	t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	ents, err := tx.ReadDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != parts {
		t.Fatalf("%s has %d files, want %d", dir, len(ents), parts)
	}
	var lines []string
	for p := 0; p < parts; p++ {
		f, err := tx.Open(ctx, fmt.Sprintf("%s/part-%05d", dir, p))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := f.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		s := b.String()
		if s == "" {
			continue
		}
		if !strings.HasSuffix(s, "\n") {
			t.Fatalf("part %d does not end in a newline", p)
		}
		pl := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		for i := 1; key != nil && i < len(pl); i++ {
			if key(pl[i-1]) > key(pl[i]) {
				t.Fatalf("part %d not sorted: %q before %q", p, pl[i-1], pl[i])
			}
		}
		lines = append(lines, pl...)
	}
	return lines
}

func uniqKey(line string) string { return strings.TrimLeft(line, " 0123456789") }

var mrJobID = regexp.MustCompile(`(?m)^Job ID:\s+(mr_[0-9a-f]+)$`)

// mrRun runs 'plasma mr run' and returns its output and exit status.
func mrRun(t *testing.T, c *clustertest.Procs, args ...string) (string, int) {
	t.Helper()
	return c.Run(nil, append([]string{"mr", "run"}, args...)...)
}

func plasmaCat(t *testing.T, c *clustertest.Procs, path string) string {
	t.Helper()
	return c.MustRun("cat", path)
}

// TestMRWordCount: a streaming word count over several files (one of
// them empty, one without a final newline) with small splits and a tiny
// sort buffer (spills and multi-pass merges) gives exactly 'sort | uniq
// -c'; a job file sets the options; the work directory is left empty and
// the report is in the log directory.
func TestMRWordCount(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	files := map[string][]byte{
		"a.txt":       testkit.MRText(1, 6000),
		"b.txt":       testkit.MRText(2, 3000),
		"c.txt":       []byte("the end without newline"),
		"empty.txt":   {},
		"_SUCCESS":    []byte("ignored: names starting with _ are skipped\n"),
		".hidden.txt": []byte("ignored too\n"),
	}
	testkit.MRPut(t, c, "/in", files)
	delete(files, "_SUCCESS")
	delete(files, ".hidden.txt")

	jobFile := filepath.Join(t.TempDir(), "wc.toml")
	os.WriteFile(jobFile, []byte(`# word count
name = "wordcount"
input = "/in"
output = "/out"
work = "/work"
log = "/log"
map = '''`+testkit.MRWordMapper+`'''
reduce = "`+testkit.MRCountReducer+`"
partitions = 3
split_size = "64K"
sort_buffer = "16K"   # tiny: many spills and merge passes
local_slots = 3
`), 0o644)
	out, code := mrRun(t, c, jobFile)
	if code != 0 {
		t.Fatalf("mr run: exit %d:\n%s", code, out)
	}
	t.Logf("mr run:\n%s", out)
	testkit.SameLines(t, mrOutput(t, c, "/out", 3, uniqKey), testkit.LocalCount(t, files))
	if v := testkit.ReportValue(t, out, "Job_status"); v != "successful" {
		t.Fatalf("status %q", v)
	}
	if n := testkit.ReportValue(t, out, "Spills"); n == "0" {
		t.Fatalf("no spills with a 16K sort buffer:\n%s", out)
	}
	if n := testkit.ReportValue(t, out, "Merge passes"); n == "0" {
		t.Fatalf("no merge passes with a 16K sort buffer:\n%s", out)
	}
	if n := testkit.ReportValue(t, out, "Retries"); n != "0" {
		t.Fatalf("retries: %s", n)
	}
	id := mrJobID.FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no job id in:\n%s", out)
	}
	if rep := plasmaCat(t, c, "/log/"+id[1]+"/report"); !strings.Contains(rep, "Job_status: successful") {
		t.Fatalf("report in the log dir:\n%s", rep)
	}
	if ls := strings.TrimSpace(c.MustRun("ls", "/work")); ls != "" {
		t.Fatalf("work directory not cleaned: %q", ls)
	}
	// The output exists now: a second run refuses to start.
	if out, code := mrRun(t, c, jobFile); code == 0 || !strings.Contains(out, "exists") {
		t.Fatalf("second run into an existing output: exit %d:\n%s", code, out)
	}
}

// TestMRRecordsNotSplit: lines crossing block (= split) boundaries, lines
// ending just before, at and after a boundary, a line longer than several
// blocks and empty lines are each read by exactly one map task: an
// identity job (cat, no reducer) outputs exactly the input's lines,
// sorted.
func TestMRRecordsNotSplit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	const bs = 64 << 10
	var b bytes.Buffer
	line := func(n int, tag string) {
		s := fmt.Sprintf("%s-%d-", tag, b.Len())
		for len(s) < n {
			s += "x"
		}
		b.WriteString(s[:max(n, 0)])
		b.WriteByte('\n')
	}
	r := rand.New(rand.NewPCG(3, 4))
	for blk := 1; blk <= 12; blk++ {
		edge := blk * bs
		// Fill up to a chosen distance from the boundary, then a line
		// whose '\n' falls at edge-1, edge or edge+1, or one that starts
		// exactly at the edge.
		mode := blk % 4
		for b.Len() < edge-2000 {
			line(10+r.IntN(300), "r")
		}
		rest := edge - b.Len()
		switch mode {
		case 0:
			line(rest-1, "nl-at-edge-1") // '\n' is the edge's last byte before it
		case 1:
			line(rest, "nl-at-edge") // '\n' at the edge itself
		case 2:
			line(rest+1, "nl-after-edge")
		case 3:
			line(rest-1, "before")
			line(50, "starts-at-edge")
		}
		if blk == 6 {
			b.WriteString("\n\n")
			line(3*bs+100, "long") // spans four blocks
		}
	}
	b.WriteString("last line without newline")
	data := b.Bytes()
	testkit.MRPut(t, c, "/in", map[string][]byte{"lines": data})

	out, code := mrRun(t, c, "-input", "/in", "-output", "/sorted", "-work", "/work", "-log", "/log",
		"-map", "cat", "-partitions", "2", "-split-size", "64K", "-sort-buffer", "256K")
	if code != 0 {
		t.Fatalf("mr run: exit %d:\n%s", code, out)
	}
	if n := testkit.ReportValue(t, out, "Map tasks"); n == "1" {
		t.Fatalf("one map task: the splits did not cut the file")
	}
	want := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	sort.Strings(want)
	got := mrOutput(t, c, "/sorted", 2, func(s string) string { return s })
	testkit.SameLines(t, got, want)
	if n := testkit.ReportValue(t, out, "Map input records"); n != fmt.Sprint(len(want)) {
		t.Fatalf("map input records %s, want %d", n, len(want))
	}
}

// TestMREmptyInput: an input directory without files gives an output
// directory of empty partitions.
func TestMREmptyInput(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	c.MustRun("mkdir", "/in")
	out, code := mrRun(t, c, "-input", "/in", "-output", "/out", "-work", "/work", "-log", "/log",
		"-map", testkit.MRWordMapper, "-reduce", testkit.MRCountReducer, "-partitions", "2")
	if code != 0 {
		t.Fatalf("mr run: exit %d:\n%s", code, out)
	}
	if got := mrOutput(t, c, "/out", 2, nil); len(got) != 0 {
		t.Fatalf("output of empty input: %q", got)
	}
}

// TestMRRetry: a map task that fails once (the first attempt of whichever
// task runs first) is run again; the output is exact, the report counts
// the retry and the log directory has the failed attempt's stderr.
func TestMRRetry(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	files := map[string][]byte{"a": testkit.MRText(5, 3000)}
	testkit.MRPut(t, c, "/in", files)
	mark := filepath.Join(t.TempDir(), "failed-once")
	mapper := fmt.Sprintf(`if mkdir %s 2>/dev/null; then echo "first attempt gives up" >&2; exit 3; fi; %s`, mark, testkit.MRWordMapper)
	out, code := mrRun(t, c, "-input", "/in", "-output", "/out", "-work", "/work", "-log", "/log",
		"-map", mapper, "-reduce", testkit.MRCountReducer, "-partitions", "2", "-split-size", "64K")
	if code != 0 {
		t.Fatalf("mr run: exit %d:\n%s", code, out)
	}
	testkit.SameLines(t, mrOutput(t, c, "/out", 2, uniqKey), testkit.LocalCount(t, files))
	if n := testkit.ReportValue(t, out, "Retries"); n != "1" {
		t.Fatalf("retries %s, want 1:\n%s", n, out)
	}
	id := mrJobID.FindStringSubmatch(out)[1]
	logs := c.MustRun("ls", "/log/"+id)
	m := regexp.MustCompile(`map-\d{5}\.a1\.stderr`).FindString(logs)
	if m == "" {
		t.Fatalf("no stderr of the failed attempt in /log/%s:\n%s", id, logs)
	}
	if s := plasmaCat(t, c, "/log/"+id+"/"+m); !strings.Contains(s, "first attempt gives up") {
		t.Fatalf("stderr log: %q", s)
	}
}

// TestMRTaskAlwaysFails: a job whose reducer always fails stops after
// -max-attempts attempts with exit status 1, its stderr in the log
// directory, no output directory and an empty work directory.
func TestMRTaskAlwaysFails(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	testkit.MRPut(t, c, "/in", map[string][]byte{"a": testkit.MRText(6, 500)})
	out, code := mrRun(t, c, "-input", "/in", "-output", "/out", "-work", "/work", "-log", "/log",
		"-map", testkit.MRWordMapper, "-reduce", `echo "reducer is doomed" >&2; exit 7`, "-partitions", "1", "-max-attempts", "2")
	if code != 1 {
		t.Fatalf("mr run: exit %d, want 1:\n%s", code, out)
	}
	if v := testkit.ReportValue(t, out, "Job_status"); v != "failed" {
		t.Fatalf("status %q", v)
	}
	if _, code := c.Run(nil, "ls", "/out"); code == 0 {
		t.Fatal("a failed job left an output directory")
	}
	if ls := strings.TrimSpace(c.MustRun("ls", "/work")); ls != "" {
		t.Fatalf("work directory not cleaned: %q", ls)
	}
	id := mrJobID.FindStringSubmatch(out)[1]
	for a := 1; a <= 2; a++ {
		s := plasmaCat(t, c, fmt.Sprintf("/log/%s/reduce-00000.a%d.stderr", id, a))
		if !strings.Contains(s, "reducer is doomed") || !strings.Contains(s, "exit status 7") {
			t.Fatalf("stderr log of attempt %d: %q", a, s)
		}
	}
}

// startTaskServer starts 'plasma mr taskserver' paired with datanode dn
// with options extra and returns the process and its address.
func startTaskServer(t *testing.T, c *clustertest.Procs, dn *clustertest.Proc, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	args := []string{"mr", "taskserver", "-listen", "127.0.0.1:0", "-datanode", dn.Addr, "-slots", "2",
		"-credential", c.IssueCredential("taskserver", auth.RoleTaskServer)}
	cmd := exec.Command(c.Bin, append(args, extra...)...)
	cmd.Env = c.Env()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("task server: %v: %s", err, stderr.String())
	}
	return cmd, strings.TrimSpace(line)
}

// TestMRTaskServers: two task servers, one per datanode; map tasks run
// beside their input, and killing the task server running a map task
// mid-job still gives exact output (the task is re-run on the other).
func TestMRTaskServers(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	files := map[string][]byte{"a": testkit.MRText(8, 4000), "b": testkit.MRText(9, 4000)}
	testkit.MRPut(t, c, "/in", files)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("0123456789abcdef-task-server-token\n"), 0o600)
	var addrs []string
	procs := map[string]*exec.Cmd{}
	for _, dn := range c.DNs {
		p, a := startTaskServer(t, c, dn, "-token-file", tokenFile)
		addrs = append(addrs, a)
		procs[a] = p
	}
	base := []string{"-input", "/in", "-work", "/work", "-log", "/log", "-reduce", testkit.MRCountReducer, "-partitions", "3", "-split-size", "128K",
		"-taskserver", addrs[0], "-taskserver", addrs[1]}
	// Without the token the task servers refuse the coordinator.
	if out, code := mrRun(t, c, append(base, "-output", "/out0", "-map", testkit.MRWordMapper)...); code != 1 || !strings.Contains(out, "token") {
		t.Fatalf("mr run without the token: exit %d:\n%s", code, out)
	}
	base = append(base, "-token-file", tokenFile)

	// A plain run: every map task local, exact output.
	out, code := mrRun(t, c, append(base, "-output", "/out1", "-map", testkit.MRWordMapper)...)
	if code != 0 {
		t.Fatalf("mr run: exit %d:\n%s", code, out)
	}
	t.Logf("mr run:\n%s", out)
	want := testkit.LocalCount(t, files)
	testkit.SameLines(t, mrOutput(t, c, "/out1", 3, uniqKey), want)
	if v := testkit.ReportValue(t, out, "Number input files"); v == "0" {
		t.Fatalf("no input files counted:\n%s", out)
	}

	// The first attempt to start announces its task server and waits;
	// the test kills that server, then lets the orphan go. (The commands
	// run as user nobody: the directory is everybody's.)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	mark, who, release := filepath.Join(dir, "mark"), filepath.Join(dir, "who"), filepath.Join(dir, "release")
	mapper := fmt.Sprintf(`if mkdir %s 2>/dev/null; then echo "$PLASMAMR_TASKSERVER" > %s.tmp && mv %s.tmp %s; while [ ! -e %s ]; do sleep 0.01; done; fi; %s`,
		mark, who, who, who, release, testkit.MRWordMapper)
	run := exec.Command(c.Bin, append([]string{"mr", "run", "-output", "/out2", "-map", mapper}, base...)...)
	run.Env = c.Env()
	var runOut bytes.Buffer
	run.Stdout, run.Stderr = &runOut, &runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(release, nil, 0o644); run.Process.Kill(); run.Wait() })
	var victim string
	deadline := time.Now().Add(2 * time.Minute)
	for victim == "" {
		if b, err := os.ReadFile(who); err == nil {
			victim = strings.TrimSpace(string(b))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no map attempt started:\n%s", runOut.String())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
	p := procs[victim]
	if p == nil {
		t.Fatalf("attempt ran on %q, not a task server", victim)
	}
	p.Process.Kill()
	p.Wait()
	os.WriteFile(release, nil, 0o644)
	if err := run.Wait(); err != nil {
		t.Fatalf("mr run after a task server was killed: %v:\n%s", err, runOut.String())
	}
	t.Logf("mr run with a task server killed:\n%s", runOut.String())
	testkit.SameLines(t, mrOutput(t, c, "/out2", 3, uniqKey), want)
	if v := testkit.ReportValue(t, runOut.String(), "Retries"); v == "0" {
		t.Fatalf("no retry counted:\n%s", runOut.String())
	}
}
