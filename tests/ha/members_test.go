package ha

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/loopback"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// Helpers of the membership tests (issue 22, item 5): a namenode joining
// the running group, and 'plasma admin' run against the group.

// groupID is the group's id as the leader answers it.
func (g *group) groupID() string {
	g.t.Helper()
	l := g.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, l.addr, auth.None, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Call(ctx, &wire.Request{Op: wire.OpNamenodes})
	if err != nil || len(r.Paths) < 4 {
		g.t.Fatalf("ask the leader its group: %v %+v", err, r)
	}
	return r.Paths[3]
}

// joinMember starts a new namenode (a new, empty database) that joins
// group gid as member id, and lists it among the members.
func (g *group) joinMember(id, gid string) *member {
	g.t.Helper()
	a, err := loopback.FreePair()
	if err != nil {
		g.t.Fatal(err)
	}
	m := &member{id: id, addr: a, db: filepath.Join(g.dir, "nn"+id+".db")}
	m.log = m.db + ".out"
	g.rejoin(m, gid)
	g.members = append(g.members, m)
	g.waitRole(m, "joining")
	return m
}

// waitRole waits until member m answers with role.
func (g *group) waitRole(m *member, role string) {
	g.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := g.status(m)
		if err == nil && st.role == role {
			return
		}
		if time.Now().After(deadline) || !m.running() {
			g.t.Fatalf("member %s is not %s after 60s (or exited): %+v %v", m.id, role, st, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// rejoin starts member m with -join gid (its database as it is).
func (g *group) rejoin(m *member, gid string) {
	g.t.Helper()
	g.start(&m.proc, append([]string{"namenode", "-db", m.db, "-security", "none", "-join", gid, "-id", m.id, "-listen", m.addr,
		"-log-level", "warn"}, g.memberArgs...)...)
}

// admin runs 'plasma admin args...' with the addresses of the members
// listed as the namenode list.
func (g *group) admin(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.bin, append([]string{"admin"}, args...)...)
	cmd.Args = append(cmd.Args, "-namenode", strings.Join(g.addrs(), ","))
	cmd.Env = append(os.Environ(), "PLASMAFS_SECURITY=none", "PLASMAFS_DATA_SECURITY=none")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustAdmin is admin that fails the test on an error.
func (g *group) mustAdmin(args ...string) string {
	g.t.Helper()
	out, err := g.admin(args...)
	if err != nil {
		g.t.Fatalf("plasma admin %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// follower returns a running member that does not lead.
func (g *group) follower() *member {
	g.t.Helper()
	l := g.leader()
	for _, m := range g.members {
		if m != l && m.running() {
			return m
		}
	}
	g.t.Fatal("no running follower")
	return nil
}

// without returns the members but m.
func (g *group) without(m *member) []*member {
	var out []*member
	for _, x := range g.members {
		if x != m {
			out = append(out, x)
		}
	}
	return out
}

// logHas tells whether member m's output holds s.
func logHas(m *member, s string) bool {
	b, _ := os.ReadFile(m.log)
	return strings.Contains(string(b), s)
}

// checkHolds stops every member and checks that each member's own
// database holds every acknowledged commit.
func (g *group) checkHolds(acked []string, ms ...*member) {
	g.t.Helper()
	g.waitCaughtUp()
	g.stopMembers()
	for _, m := range ms {
		if n := missing(acked, rootNames(g.t, m)); n > 0 {
			g.t.Errorf("member %s's database lacks %d of %d acknowledged commits", m.id, n, len(acked))
		}
	}
}
