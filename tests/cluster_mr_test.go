package tests

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// MapReduce on a 'plasma cluster up' cluster: its task servers.

// taskServers returns the task servers the cluster's client
// configuration names.
func (lc *localCluster) taskServers() []string {
	b, err := os.ReadFile(filepath.Join(lc.home, ".plasmafs"))
	if err != nil {
		lc.t.Fatal(err)
	}
	var addrs []string
	for _, m := range regexp.MustCompile(`taskserver = "([^"]+)"`).FindAllStringSubmatch(string(b), -1) {
		addrs = append(addrs, m[1])
	}
	return addrs
}

// putLocal writes files into dir in PlasmaFS with 'plasma put'.
func (lc *localCluster) putLocal(dir string, files map[string][]byte) {
	lc.t.Helper()
	lc.mustRun("mkdir", "-p", dir)
	local := lc.t.TempDir()
	for name, data := range files {
		p := filepath.Join(local, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			lc.t.Fatal(err)
		}
		lc.mustRun("put", "-q", "-rep", "1", p, dir+"/"+name)
	}
}

// partLines returns the lines of the part files of an output directory.
func (lc *localCluster) partLines(dir string, parts int) []string {
	lc.t.Helper()
	ls := strings.Fields(lc.mustRun("ls", dir))
	if len(ls) != parts {
		lc.t.Fatalf("%s holds %v, want %d part files", dir, ls, parts)
	}
	var lines []string
	for _, p := range ls {
		s := lc.mustRun("cat", dir+"/"+p)
		if s != "" {
			lines = append(lines, strings.Split(strings.TrimSuffix(s, "\n"), "\n")...)
		}
	}
	return lines
}

// TestClusterUpTaskServers (issue 12 item 3): 'cluster up' starts one
// 'plasma mr taskserver' beside each datanode, each paired with its
// datanode, each with its own credential in the secrets directory (0600;
// issue 19 item 6 replaced the shared token); 'mr run' without task
// server flags uses them (the report lists both, each with its datanode)
// and the word count is exact; a killed task server is restarted;
// 'cluster down' stops them.
func TestClusterUpTaskServers(t *testing.T) {
	lc := newLocalCluster(t)
	out := lc.mustRun(lc.upArgs("-size", "32M", "-detach")...)
	if !strings.Contains(out, "is up") || !strings.Contains(out, "task servers") {
		t.Fatalf("cluster up -detach:\n%s", out)
	}
	addrs := lc.taskServers()
	if len(addrs) != 2 {
		t.Fatalf("client configuration names task servers %v, want 2", addrs)
	}
	for i := range addrs {
		cred := filepath.Join(lc.dir, "secrets", fmt.Sprintf("ts%d.pem", i+1))
		if st, err := os.Stat(cred); err != nil || st.Mode().Perm()&^fs.FileMode(0o600) != 0 {
			t.Fatalf("task server credential %s: %v %v", cred, st, err)
		}
	}
	m := lc.members()
	for _, a := range addrs {
		if !processAlive(m["taskserver "+a]) {
			t.Fatalf("no task server process listening on %s (processes %v)", a, m)
		}
	}

	files := map[string][]byte{"a": mrText(21, 1500), "b": mrText(22, 1500)}
	lc.putLocal("/in", files)
	wc := []string{"mr", "run", "-input", "/in", "-work", "/work", "-log", "/log",
		"-map", mrWordMapper, "-reduce", mrCountReducer, "-partitions", "3", "-split-size", "64K"}
	out = lc.mustRun(append(wc, "-output", "/out")...)
	t.Logf("mr run:\n%s", out)
	runners := reportValue(t, out, "Task runners")
	for _, a := range addrs {
		if !regexp.MustCompile(regexp.QuoteMeta(a) + `\(2 slots, datanode "[0-9a-f]+"\)`).MatchString(runners) {
			t.Fatalf("task runners %q: not task server %s paired with a datanode", runners, a)
		}
	}
	if strings.Contains(runners, "local") {
		t.Fatalf("tasks ran in the mr run process: %q", runners)
	}
	want := localCount(t, files)
	sameLines(t, lc.partLines("/out", 3), want)

	// A task server that dies is restarted; the next job uses it again.
	victim := "taskserver " + addrs[0]
	lc.killMember(m, victim)
	lc.restarted(victim, m[victim])
	var out2 string
	awaitCond(t, 60*time.Second, "a job with both task servers after the restart", func() bool {
		lc.run("rm", "-r", "/out2")
		o, code := lc.run(append(wc, "-output", "/out2")...)
		out2 = o
		return code == 0 && strings.Count(reportValue(t, o, "Task runners"), "slots") == 2
	})
	t.Logf("mr run after the restart:\n%s", out2)
	sameLines(t, lc.partLines("/out2", 3), want)

	before := lc.members()
	lc.mustRun("cluster", "down", "-dir", lc.dir)
	for role, pid := range before {
		if processAlive(pid) {
			t.Errorf("%s (pid %d) still running after cluster down", role, pid)
		}
	}
}
