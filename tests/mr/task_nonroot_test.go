package mr

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMRTaskServerNotRootRunsOnlyItsOwnersTasks: a task server that is
// not run as root (as 'cluster up' run by an ordinary user starts them)
// cannot switch users, so task commands run as its own OS user and could
// read its credential, the cluster's secrets of the user who runs it and
// its memory (other jobs' delegated keys). Alice's job must not run
// there: her map reading the task server's key file gets nothing, and the
// job says why. The jobs of the user whose client configuration the task
// server runs with (its owner) still run.
func TestMRTaskServerNotRootRunsOnlyItsOwnersTasks(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	home := testkit.OpenDir(t)
	own := func(src, name string) string {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(home, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tsCred := own(c.IssueCredential("taskserver", auth.RoleTaskServer), "ts.pem")
	ownerCred := own(c.AdminCred, "owner.pem")

	// The task server, as OS user nobody, with its owner's configuration.
	cmd := exec.Command(c.Bin, "mr", "taskserver", "-listen", "127.0.0.1:0", "-datanode", c.DNs[0].Addr, "-slots", "2", "-credential", tsCred)
	cmd.Env = append(c.Env(), "PLASMAFS_CREDENTIAL="+ownerCred, "HOME="+home)
	cmd.Dir = home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
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
		t.Fatalf("task server as nobody: %v: %s", err, stderr.String())
	}
	addr := strings.TrimSpace(line)

	alice := []string{"PLASMAFS_CREDENTIAL=" + c.IssueCredential("alice", auth.RoleUser)}
	c.MustRun("mkdir", "/alice")
	c.MustRun("chown", "alice", "/alice")
	for _, args := range [][]string{{"mkdir", "/alice/in"}, {"put", "-q", "-stdin", "/alice/in/words"}} {
		if out, code := c.RunEnv(alice, []byte("a b c\n"), args...); code != 0 {
			t.Fatalf("alice's %s: exit %d:\n%s", args[0], code, out)
		}
	}
	mapper := fmt.Sprintf(`cat >/dev/null; if grep -q 'PRIVATE KEY' %s; then r=read; else r=refused; fi; printf 'key\t%%s\n' $r`, tsCred)
	out, code := c.RunEnv(alice, nil, "mr", "run", "-input", "/alice/in", "-output", "/alice/out", "-work", "/alice/work", "-log", "/alice/log",
		"-partitions", "1", "-max-attempts", "1", "-taskserver", addr, "-map", mapper)
	t.Logf("alice's job: exit %d:\n%s", code, out)
	if code == 0 {
		for _, l := range mrOutput(t, c, "/alice/out", 1, nil) {
			if l == "key\tread" {
				t.Errorf("alice's map read the key of a task server not run as root")
			}
		}
		t.Fatalf("alice's job ran on a task server that runs commands as its own user")
	}
	if !strings.Contains(out, "only") {
		t.Errorf("alice's failed job does not say that the task server takes only its owner's tasks:\n%s", out)
	}

	// The owner's job runs.
	testkit.MRPut(t, c, "/owner/in", map[string][]byte{"words": []byte("x y\n")})
	if out, code := c.Run(nil, "mr", "run", "-input", "/owner/in", "-output", "/owner/out", "-work", "/owner/work", "-log", "/owner/log",
		"-partitions", "1", "-max-attempts", "1", "-taskserver", addr, "-map", `cat >/dev/null; printf 'ok\t1\n'`); code != 0 {
		t.Fatalf("the owner's job on its task server: exit %d:\n%s", code, out)
	}
}
