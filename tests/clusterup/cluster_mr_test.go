package clusterup

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
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
		if !testkit.ProcessAlive(m["taskserver "+a]) {
			t.Fatalf("no task server process listening on %s (processes %v)", a, m)
		}
	}

	files := map[string][]byte{"a": testkit.MRText(21, 1500), "b": testkit.MRText(22, 1500)}
	lc.putLocal("/in", files)
	wc := []string{"mr", "run", "-input", "/in", "-work", "/work", "-log", "/log",
		"-map", testkit.MRWordMapper, "-reduce", testkit.MRCountReducer, "-partitions", "3", "-split-size", "64K"}
	out = lc.mustRun(append(wc, "-output", "/out")...)
	t.Logf("mr run:\n%s", out)
	runners := testkit.ReportValue(t, out, "Task runners")
	for _, a := range addrs {
		if !regexp.MustCompile(regexp.QuoteMeta(a) + `\(2 slots, datanode "[0-9a-f]+"\)`).MatchString(runners) {
			t.Fatalf("task runners %q: not task server %s paired with a datanode", runners, a)
		}
	}
	if strings.Contains(runners, "local") {
		t.Fatalf("tasks ran in the mr run process: %q", runners)
	}
	want := testkit.LocalCount(t, files)
	testkit.SameLines(t, lc.partLines("/out", 3), want)

	// A task server that dies is restarted; the next job uses it again.
	victim := "taskserver " + addrs[0]
	lc.killMember(m, victim)
	lc.restarted(victim, m[victim])
	var out2 string
	testkit.AwaitCond(t, 60*time.Second, "a job with both task servers after the restart", func() bool {
		lc.run("rm", "-r", "/out2")
		o, code := lc.run(append(wc, "-output", "/out2")...)
		out2 = o
		return code == 0 && strings.Count(testkit.ReportValue(t, o, "Task runners"), "slots") == 2
	})
	t.Logf("mr run after the restart:\n%s", out2)
	testkit.SameLines(t, lc.partLines("/out2", 3), want)

	before := lc.members()
	lc.mustRun("cluster", "down", "-dir", lc.dir)
	for role, pid := range before {
		if testkit.ProcessAlive(pid) {
			t.Errorf("%s (pid %d) still running after cluster down", role, pid)
		}
	}
}

// TestMRClusterUpOrdinaryUser: on a 'cluster up' cluster, alice (a
// credential from 'plasma admin user add alice', used by an OS user that
// is not root) submits a job to the cluster's task servers: it runs
// there, with exact output owned by alice; the task servers answer no
// plain HTTP.
func TestMRClusterUpOrdinaryUser(t *testing.T) {
	lc := newLocalCluster(t)
	lc.mustRun(lc.upArgs("-size", "32M", "-detach")...)
	addrs := lc.taskServers()
	if len(addrs) == 0 {
		t.Fatal("no task servers in the client configuration")
	}

	// alice's home, for the unprivileged OS user nobody.
	home := testkit.OpenDir(t)
	aliceCred := filepath.Join(home, "alice.pem")
	lc.mustRun("admin", "user", "add", "alice", "-dir", lc.dir, "-o", aliceCred)
	conf, err := os.ReadFile(filepath.Join(lc.home, ".plasmafs"))
	if err != nil {
		t.Fatal(err)
	}
	conf = regexp.MustCompile(`(?m)^(\s*credential\s*=\s*)"[^"]*"`).ReplaceAll(conf, []byte(`${1}"`+aliceCred+`"`))
	words := testkit.MRText(31, 800)
	for name, data := range map[string][]byte{".plasmafs": conf, "words": words} {
		if err := os.WriteFile(filepath.Join(home, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"", ".plasmafs", "alice.pem", "words"} {
		if err := os.Chown(filepath.Join(home, name), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	lc.mustRun("mkdir", "/alice")
	lc.mustRun("chown", "alice", "/alice")
	asAlice := func(args ...string) (string, int) {
		cmd := exec.Command(clustertest.Binary(t), args...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "PLASMAFS_CONFIG=" + filepath.Join(home, ".plasmafs")}
		cmd.Dir = home
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		b, err := cmd.CombinedOutput()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatalf("plasma %v: %v", args, err)
		}
		return string(b), cmd.ProcessState.ExitCode()
	}
	for _, args := range [][]string{{"mkdir", "/alice/in"}, {"put", "-q", "-rep", "1", filepath.Join(home, "words"), "/alice/in/words"}} {
		if out, code := asAlice(args...); code != 0 {
			t.Fatalf("alice's %s: exit %d:\n%s", args[0], code, out)
		}
	}
	out, code := asAlice("mr", "run", "-input", "/alice/in", "-output", "/alice/out", "-work", "/alice/work", "-log", "/alice/log",
		"-map", testkit.MRWordMapper, "-reduce", testkit.MRCountReducer, "-partitions", "2")
	if code != 0 {
		t.Fatalf("alice's job on the cluster's task servers: exit %d:\n%s", code, out)
	}
	runners := testkit.ReportValue(t, out, "Task runners")
	if strings.Contains(runners, "local") || !strings.Contains(runners, addrs[0]) {
		t.Fatalf("alice's tasks did not run on the task servers: %q", runners)
	}
	testkit.SameLines(t, lc.partLines("/alice/out", 2), testkit.LocalCount(t, map[string][]byte{"words": words}))
	ls := lc.mustRun("ls", "-l", "/alice/out")
	for _, l := range strings.Split(strings.TrimSpace(ls), "\n") {
		if f := strings.Fields(l); len(f) > 3 && strings.HasPrefix(f[len(f)-1], "part-") && !strings.Contains(l, " alice ") {
			t.Errorf("output file not owned by alice: %s", l)
		}
	}
	for _, a := range addrs {
		if resp := testkit.PlainHTTP(t, a); strings.HasPrefix(resp, "HTTP/") {
			t.Errorf("task server %s answered plain HTTP:\n%s", a, resp)
		}
	}
}
