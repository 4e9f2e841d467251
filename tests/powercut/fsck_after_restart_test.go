package powercut

import (
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestFsckAfterNamenodeRestart (issue 19 item 9): fsck run right after a
// namenode restart, before a datanode has registered again, waits for it
// (and says so) instead of reporting its replicas as damaged; a datanode
// that stays away makes fsck say that its replicas were not checked, with
// exit status 3, never the "problems found" status 1.
func TestFsckAfterNamenodeRestart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	cl := c.Client(client.Config{})
	testkit.WriteFile(t, cl, "/f", testkit.RandomBytes(t, 300<<10), 2)
	cl.Close()
	nodes := testkit.DatanodeIdentities(t, c)

	// dn2 is down while the namenode restarts: fsck waits for it.
	c.Kill(c.DNs[1])
	c.Kill(c.NN)
	c.StartNamenode()
	cmd := exec.Command(c.Bin, "fsck")
	cmd.Env = c.Env()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := testkit.WatchOutput(pr)
	exited := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); exited <- err }()
	t.Cleanup(func() { cmd.Process.Kill() })
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), "waiting up to"); {
		select {
		case err := <-exited:
			t.Fatalf("fsck ended (%v) without waiting for the datanode that is down:\n%s", err, out)
		case <-out.Added():
		case <-time.After(time.Until(deadline)):
			t.Fatalf("fsck did not say within 60s that it waits for the datanode that is down:\n%s", out)
		}
	}
	c.StartDatanode(c.DNs[1])
	select {
	case err := <-exited:
		if err != nil || !strings.Contains(out.String(), " 0 problems") {
			t.Fatalf("fsck after the namenode restart and the datanode's return: %v:\n%s", err, out)
		}
	case <-time.After(120 * time.Second):
		t.Fatalf("fsck did not end within 120s:\n%s", out)
	}

	// dn2 stays down: its replicas are not checked, and fsck says so.
	c.Kill(c.DNs[1])
	c.Kill(c.NN)
	c.StartNamenode()
	got, code := c.Run(nil, "fsck", "-wait", "300ms")
	if code != 3 || !strings.Contains(got, "not checked") || !strings.Contains(got, nodes[c.DNs[1].Addr]) || regexp.MustCompile(`\d+ problems found`).MatchString(got) {
		t.Fatalf("fsck with datanode %s down: exit %d (want 3, replicas not checked):\n%s", nodes[c.DNs[1].Addr], code, got)
	}
	if strings.Contains(got, "missing address") {
		t.Errorf("fsck reports a missing address:\n%s", got)
	}
	// Once it is back, everything is checked again.
	c.StartDatanode(c.DNs[1])
	c.WaitLive(2)
	if got, code := c.Run(nil, "fsck"); code != 0 || !strings.Contains(got, " 0 problems") || strings.Contains(got, "not checked") {
		t.Fatalf("fsck with both datanodes back: exit %d:\n%s", code, got)
	}
}
