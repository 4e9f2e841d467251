package ha

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// Issue 22: a follower killed while commits go on catches up from the
// group's log when it comes back: its own database then holds every
// commit acknowledged while it was down.
func TestRestartedFollowerCatchesUp(t *testing.T) {
	g := startGroup(t, 3, 0)
	ctx := context.Background()
	l := g.leader()
	var f *member
	for _, m := range g.members {
		if m != l {
			f = m
			break
		}
	}
	g.kill(f)
	cl := g.client()
	defer cl.Close()
	var names []string
	for i := range 100 {
		name := fmt.Sprintf("while-down-%03d", i)
		// Acknowledged commits only: a loaded machine may see an election
		// (a commit of unknown outcome, a transaction on a lost
		// connection), which the test does not count.
		if _, err := clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(ctx, 1, name, 0); err != nil && !client.ConnLost(err) {
			t.Fatal(err)
		} else if err == nil {
			names = append(names, name)
		}
	}
	if len(names) < 50 {
		t.Fatalf("only %d of 100 commits acknowledged with 2 of 3 members up", len(names))
	}
	g.startMember(f, g.peers())
	g.waitCaughtUp()
	g.stopMembers()
	if n := missing(names, rootNames(t, f)); n > 0 {
		t.Fatalf("the restarted follower's database lacks %d of %d commits made while it was down", n, len(names))
	}
}

// Issue 22: a member restarted with another peer list, or another id,
// than its group recorded refuses to start and says what differs; so does
// -format with -peers, and a member whose Raft log is gone (it must not
// vote with lost state).
func TestMismatchedPeersRefused(t *testing.T) {
	g := startGroup(t, 3, 0)
	m := g.members[2]
	m.cmd.Process.Signal(syscall.SIGTERM)
	<-m.done
	peers := strings.Split(g.peers(), ",")
	for _, tc := range []struct {
		name, peers, id, want string
		extra                 []string
	}{
		{"fewer peers", strings.Join(peers[1:], ","), m.id, "not -peers", nil},
		{"another id", g.peers(), g.members[0].id, "not as -id", nil},
		{"a namespace of its own", g.peers(), m.id, "-format with -peers", []string{"-format", "-db", m.db + ".new"}},
		{"its Raft log lost", g.peers(), m.id, "Raft log (raft.db) is gone", nil},
	} {
		if tc.name == "its Raft log lost" {
			if err := os.Remove(m.db + ".group/raft.db"); err != nil {
				t.Fatal(err)
			}
		}
		// A member that started after all is stopped after a minute (and
		// the test fails: no refusal).
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(cctx, g.bin, "namenode", "-db", m.db, "-security", "none", "-peers", tc.peers, "-id", tc.id)
		cmd.Args = append(cmd.Args, tc.extra...)
		cmd.Env = os.Environ()
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Fatalf("%s: %v\n%s\nwant a refusal saying %q", tc.name, err, out, tc.want)
		}
	}
}
