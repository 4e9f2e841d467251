package mr

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMRTasksOfOthersAreOutOfReach: alice's and bob's tasks run on one
// task server at the same time. Alice's task must not reach bob's running
// task (here: read its environment in /proc, which with the same OS uid
// it could, as it could its standard input, i.e. bob's data), and a
// process alice's task leaves behind (in a session of its own, so no
// process-group kill reaches it) must not outlive her attempt, where it
// would wait for the tasks of every later job.
func TestMRTasksOfOthersAreOutOfReach(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	_, addr := startTaskServer(t, c, c.DNs[0])
	users := map[string][]string{}
	for _, u := range []string{"alice", "bob"} {
		users[u] = []string{"PLASMAFS_CREDENTIAL=" + c.IssueCredential(u, auth.RoleUser)}
		c.MustRun("mkdir", "/"+u)
		c.MustRun("chown", u, "/"+u)
		for _, args := range [][]string{{"mkdir", "/" + u + "/in"}, {"put", "-q", "-stdin", "/" + u + "/in/words"}} {
			if out, code := c.RunEnv(users[u], []byte(u+"'s data\n"), args...); code != 0 {
				t.Fatalf("%s's %s: exit %d:\n%s", u, args[0], code, out)
			}
		}
	}
	run := func(user, mapper string) (string, int) {
		return c.RunEnv(users[user], nil, "mr", "run", "-input", "/"+user+"/in", "-output", "/"+user+"/out",
			"-work", "/"+user+"/work", "-log", "/"+user+"/log", "-partitions", "1", "-max-attempts", "1", "-taskserver", addr, "-map", mapper)
	}

	// bob's map runs until the test opens its gate.
	gate := filepath.Join(testkit.OpenDir(t), "gate")
	bobDone := make(chan string, 1)
	go func() {
		out, code := run("bob", fmt.Sprintf(`cat >/dev/null; while [ ! -e %s ]; do sleep 0.05; done; printf 'bob\t1\n'`, gate))
		bobDone <- fmt.Sprintf("exit %d:\n%s", code, out)
	}()
	openGate := func() {
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Error(err)
		}
	}
	defer openGate()
	deadline := time.Now().Add(2 * time.Minute)
	for !processWithEnv("PLASMAMR_INPUT_FILE=/bob/in/words") {
		select {
		case res := <-bobDone:
			t.Fatalf("bob's job ended before its map was seen running: %s", res)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("bob's map task never ran")
		}
		time.Sleep(50 * time.Millisecond)
	}

	mapper := `cat >/dev/null; n=0
for e in /proc/[0-9]*/environ; do
	if grep -qa 'PLASMAMR_INPUT_FILE=/bob/' "$e" 2>/dev/null; then n=$((n+1)); fi
done
printf 'seen\t%s\n' $n
setsid sleep 100000 </dev/null >/dev/null 2>&1 &
printf 'pid\t%s\n' $!`
	out, code := run("alice", mapper)
	if code != 0 {
		t.Fatalf("alice's job: exit %d:\n%s", code, out)
	}
	var leftover int
	for _, l := range mrOutput(t, c, "/alice/out", 1, nil) {
		k, v, _ := strings.Cut(l, "\t")
		switch k {
		case "seen":
			if v != "0" {
				t.Errorf("alice's task read the environment of %s of bob's running tasks in /proc", v)
			}
		case "pid":
			leftover, _ = strconv.Atoi(v)
		}
	}
	if leftover <= 0 {
		t.Fatalf("alice's task reported no leftover pid")
	}
	t.Cleanup(func() {
		if alive(leftover, "sleep") {
			syscall.Kill(leftover, syscall.SIGKILL)
		}
	})
	openGate()
	if res := <-bobDone; !strings.HasPrefix(res, "exit 0") {
		t.Errorf("bob's job: %s", res)
	}
	deadline = time.Now().Add(time.Minute)
	for alive(leftover, "sleep") {
		if time.Now().After(deadline) {
			t.Fatalf("the process alice's task left behind (pid %d) still runs a minute after her attempt ended", leftover)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processWithEnv reports whether some process has variable kv (NAME=value)
// in its environment.
func processWithEnv(kv string) bool {
	envs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, e := range envs {
		b, err := os.ReadFile(e)
		if err != nil {
			continue
		}
		for _, v := range strings.Split(string(b), "\x00") {
			if v == kv {
				return true
			}
		}
	}
	return false
}

// alive reports whether process pid runs command comm (and is no zombie).
func alive(pid int, comm string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && strings.Contains(s[:i], "("+comm) && !strings.HasPrefix(s[i+1:], " Z")
}
