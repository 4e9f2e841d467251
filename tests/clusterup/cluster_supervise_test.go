package clusterup

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// localCluster is a 'plasma cluster up' cluster in a temporary directory,
// with HOME and PLASMAFS_CONFIG pointing there too.
type localCluster struct {
	t    *testing.T
	home string
	dir  string
	env  []string
}

func newLocalCluster(t *testing.T) *localCluster {
	home := t.TempDir()
	lc := &localCluster{t: t, home: home, dir: filepath.Join(home, "cluster")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PLASMAFS_") && !strings.HasPrefix(kv, "HOME=") {
			lc.env = append(lc.env, kv)
		}
	}
	lc.env = append(lc.env, "HOME="+home, "PLASMAFS_CONFIG="+filepath.Join(home, ".plasmafs"))
	// Whatever happens, nothing of this cluster outlives the test.
	t.Cleanup(func() {
		lc.run("cluster", "down", "-dir", lc.dir)
		for _, pid := range lc.pids() {
			if pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			for _, l := range []string{"cluster.log", "namenode.log", "dn1.log", "dn2.log"} {
				b, _ := os.ReadFile(filepath.Join(lc.dir, l))
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	return lc
}

// upArgs are the arguments of a small cluster: 64 KiB blocks, 2 MiB
// volumes.
func (lc *localCluster) upArgs(extra ...string) []string {
	return append([]string{"cluster", "up", "-dir", lc.dir, "-blocksize", "64K", "-size", "2M"}, extra...)
}

func (lc *localCluster) command(args ...string) *exec.Cmd {
	cmd := exec.Command(clustertest.Binary(lc.t), args...)
	cmd.Env = lc.env
	return cmd
}

// run runs a plasma command and returns its combined output and exit code.
func (lc *localCluster) run(args ...string) (string, int) {
	cmd := lc.command(args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		lc.t.Fatalf("plasma %v: %v", args, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

func (lc *localCluster) mustRun(args ...string) string {
	lc.t.Helper()
	out, code := lc.run(args...)
	if code != 0 {
		lc.t.Fatalf("plasma %s: exit %d:\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// members finds the cluster's processes by their command lines (not by
// the pids file, whose format is the program's own): "supervisor" (the
// 'cluster up' process), "namenode", "dn1", "dn2", ...
func (lc *localCluster) members() map[string]int {
	m := map[string]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(argv) < 3 {
			continue
		}
		arg := func(name string) string {
			for i := 0; i+1 < len(argv); i++ {
				if argv[i] == name {
					return argv[i+1]
				}
			}
			return ""
		}
		switch {
		case argv[1] == "cluster" && argv[2] == "up" && arg("-dir") == lc.dir:
			m["supervisor"] = pid
		case argv[1] == "namenode" && arg("-db") == filepath.Join(lc.dir, "namenode.db"):
			m["namenode"] = pid
		case argv[1] == "datanode" && filepath.Dir(arg("-dir")) == lc.dir:
			m[filepath.Base(arg("-dir"))] = pid
		case argv[1] == "mr" && argv[2] == "taskserver" && strings.HasPrefix(arg("-credential"), lc.dir+"/"):
			m["taskserver "+arg("-listen")] = pid
		}
	}
	return m
}

// pidsFile reads the cluster's pids file: role → process id.
func (lc *localCluster) pidsFile() map[string]int {
	b, _ := os.ReadFile(filepath.Join(lc.dir, "pids"))
	m := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			if pid, err := strconv.Atoi(f[1]); err == nil {
				m[f[0]] = pid
			}
		}
	}
	return m
}

func (lc *localCluster) pids() []int {
	var out []int
	for _, pid := range lc.members() {
		out = append(out, pid)
	}
	return out
}

// killMember kills member role with SIGKILL (never a process group: the
// pid must be a real one).
func (lc *localCluster) killMember(m map[string]int, role string) {
	lc.t.Helper()
	if m[role] <= 0 {
		lc.t.Fatalf("no process id for %s in the pids file (%v)", role, m)
	}
	syscall.Kill(m[role], syscall.SIGKILL)
}

// restarted waits until member role runs under a process id other than
// old and returns it.
func (lc *localCluster) restarted(role string, old int) int {
	lc.t.Helper()
	var pid int
	testkit.AwaitCond(lc.t, 60*time.Second, role+" was not restarted", func() bool {
		pid = lc.members()[role]
		return pid != 0 && pid != old && testkit.ProcessAlive(pid)
	})
	return pid
}

// liveDatanodes is the "N alive" count of plasma fsstat, or -1.
func (lc *localCluster) liveDatanodes() int {
	out, code := lc.run("fsstat")
	if code != 0 {
		return -1
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "datanodes:") {
			if i := strings.Index(l, "("); i >= 0 {
				if n, err := strconv.Atoi(strings.Fields(l[i+1:])[0]); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

func (lc *localCluster) checkRead(path string, want []byte) {
	lc.t.Helper()
	local := filepath.Join(lc.t.TempDir(), "copy")
	lc.mustRun("get", "-q", path, local)
	if got, _ := os.ReadFile(local); !bytes.Equal(got, want) {
		lc.t.Fatalf("%s reads back %d bytes, not the %d written", path, len(got), len(want))
	}
}

// TestClusterUpRestartsMembers (issue 8 item 11): a detached cluster keeps
// running when a member dies. A killed datanode is reported and restarted
// while reads go on from the other replica; a killed namenode is restarted,
// and the datanodes, which keep retrying instead of exiting, register with
// it again. 'cluster down' stops everything.
func TestClusterUpRestartsMembers(t *testing.T) {
	lc := newLocalCluster(t)
	out := lc.mustRun(lc.upArgs("-detach")...)
	if !strings.Contains(out, "is up") {
		t.Fatalf("cluster up -detach:\n%s", out)
	}
	m := lc.members()
	for _, role := range []string{"namenode", "dn1", "dn2"} {
		if !testkit.ProcessAlive(m[role]) {
			t.Fatalf("%s not running after cluster up -detach (processes %v)", role, m)
		}
	}
	data := testkit.RandomBytes(t, 300<<10)
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, data, 0o644)
	lc.mustRun("put", "-q", "-rep", "2", src, "/f")
	lc.checkRead("/f", data)

	// A datanode dies: reads continue, it comes back.
	lc.killMember(m, "dn1")
	lc.checkRead("/f", data)
	dn1 := lc.restarted("dn1", m["dn1"])
	testkit.AwaitCond(t, 60*time.Second, "2 live datanodes after the datanode's restart", func() bool { return lc.liveDatanodes() == 2 })
	lc.checkRead("/f", data)
	if log, _ := os.ReadFile(filepath.Join(lc.dir, "cluster.log")); !strings.Contains(string(log), "dn1 (pid "+strconv.Itoa(m["dn1"])+") died") {
		t.Errorf("cluster.log does not report the datanode's death:\n%s", log)
	}

	// The namenode dies: the datanodes wait for it, it comes back.
	lc.killMember(m, "namenode")
	lc.restarted("namenode", m["namenode"])
	testkit.AwaitCond(t, 60*time.Second, "2 live datanodes after the namenode's restart", func() bool { return lc.liveDatanodes() == 2 })
	if now := lc.members(); now["dn1"] != dn1 || now["dn2"] != m["dn2"] || now["supervisor"] != m["supervisor"] {
		t.Errorf("datanodes or supervisor changed when the namenode died: before %v (dn1 %d), after %v", m, dn1, now)
	}
	if pf := lc.pidsFile(); pf["supervisor"] != m["supervisor"] || pf["dn1"] != dn1 {
		t.Errorf("pids file %v, processes %v", pf, lc.members())
	}
	lc.checkRead("/f", data)
	lc.mustRun("put", "-q", "-rep", "2", src, "/g")
	lc.checkRead("/g", data)
	if out := lc.mustRun("fsck"); !strings.Contains(out, " 0 problems") {
		t.Errorf("fsck:\n%s", out)
	}

	// cluster down stops the supervisor and every member.
	before := lc.members()
	lc.mustRun("cluster", "down", "-dir", lc.dir)
	for role, pid := range before {
		if testkit.ProcessAlive(pid) {
			t.Errorf("%s (pid %d) still running after cluster down", role, pid)
		}
	}
}

// TestClusterUpForeground (issue 8 item 11): in the foreground, too, a
// killed datanode is reported and restarted; 'plasma cluster down' (from
// another terminal) stops the cluster cleanly, with exit status 0.
func TestClusterUpForeground(t *testing.T) {
	lc := newLocalCluster(t)
	cmd := lc.command(lc.upArgs("-datanodes", "1")...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := testkit.WatchOutput(pr)
	exited := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); exited <- err }()
	t.Cleanup(func() { cmd.Process.Kill() })
	out.WaitFor(t, "is up", exited)
	m := lc.members()
	if pf := lc.pidsFile(); pf["supervisor"] != cmd.Process.Pid || pf["dn1"] != m["dn1"] || pf["namenode"] != m["namenode"] {
		t.Errorf("pids file %v does not name the cluster up process %d and its members %v", pf, cmd.Process.Pid, m)
	}
	lc.killMember(m, "dn1")
	out.WaitFor(t, "dn1 (pid "+strconv.Itoa(m["dn1"])+") died", exited)
	lc.restarted("dn1", m["dn1"])
	testkit.AwaitCond(t, 60*time.Second, "the restarted datanode registered", func() bool { return lc.liveDatanodes() == 1 })
	before := lc.members()
	lc.mustRun("cluster", "down", "-dir", lc.dir)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("cluster up ended with %v after cluster down:\n%s", err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("cluster up still running 60s after cluster down:\n%s", out)
	}
	for role, pid := range before {
		if testkit.ProcessAlive(pid) {
			t.Errorf("%s (pid %d) still running after cluster down", role, pid)
		}
	}
}

// TestClusterDirPermissions (issue 8 item 15): after cluster up, the
// secrets are 0700/0600, and the database, the logs and the client
// configurations (which name the credential) are readable by the owner
// (and at most the group) only.
func TestClusterDirPermissions(t *testing.T) {
	lc := newLocalCluster(t)
	lc.mustRun(lc.upArgs("-detach")...)
	// Something committed, so the database has its WAL files too.
	lc.mustRun("mkdir", "/x")
	check := func(p string, allowed fs.FileMode) {
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%v", err)
			return
		}
		if perm := st.Mode().Perm(); perm&^allowed != 0 {
			t.Errorf("%s has mode %04o, allowed at most %04o", p, perm, allowed)
		}
	}
	check(filepath.Join(lc.dir, "secrets"), 0o700)
	secrets, _ := os.ReadDir(filepath.Join(lc.dir, "secrets"))
	if len(secrets) == 0 {
		t.Fatal("no secrets")
	}
	for _, e := range secrets {
		check(filepath.Join(lc.dir, "secrets", e.Name()), 0o600)
	}
	check(filepath.Join(lc.home, ".plasmafs"), 0o640)
	seen := 0
	err := filepath.WalkDir(lc.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.Type().IsRegular() && (strings.HasPrefix(name, "namenode.db") || strings.HasSuffix(name, ".log") || name == "client.conf") {
			check(p, 0o640)
			seen++
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if seen < 6 { // namenode.db, two logs of datanodes, namenode.log, cluster.log, client.conf
		t.Errorf("only %d of the database, log and configuration files found", seen)
	}
}

// TestDatanodeWaitsForNamenode (issue 8 item 11): a datanode started while
// the namenode is down does not exit; it retries with backoff and registers
// once the namenode is back (as the running datanode does after losing it).
func TestDatanodeWaitsForNamenode(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	c.Kill(c.NN)
	p := c.AddDatanode()
	testkit.AwaitCond(t, 60*time.Second, "the new datanode did not report retrying", func() bool {
		if !p.Running() {
			t.Fatalf("datanode exited while the namenode was down:\n%s", c.ReadLog(p))
		}
		return strings.Contains(c.ReadLog(p), "namenode unreachable, retrying")
	})
	c.StartNamenode()
	c.WaitLive(2)
	if !p.Running() || !c.DNs[0].Running() {
		t.Fatalf("a datanode exited:\n%s\n%s", c.ReadLog(c.DNs[0]), c.ReadLog(p))
	}
}
