package ha

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// Issue 22: a follower serves nothing; it answers every request, a commit
// too, "not the leader, try X" with the leader's address, and a client
// given only a follower's address gets ErrNotLeader naming the leader.
// 'plasma admin namenodes' shows one leader and two followers, none
// lagging once caught up.
func TestFollowerRefusesWithLeaderAddress(t *testing.T) {
	g := startGroup(t, 3, 0)
	ctx := context.Background()
	l := g.leader()
	cl := g.client()
	if _, err := clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(ctx, 1, "made-on-leader", 0); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	for _, m := range g.members {
		if m == l {
			continue
		}
		c, err := rpc.Dial(ctx, m.addr, auth.None, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []*wire.Request{
			{Op: wire.OpPing},
			{Op: wire.OpLookup, Path: "/made-on-leader"},
			{Op: wire.OpCreate, Txn: 7, Flags: wire.FlagBegin, Path: "/x", Type: wire.TypeDir, Mode: 0o755},
			{Op: wire.OpCommit, Txn: 7},
		} {
			r, err := c.Call(ctx, q)
			if err != nil {
				t.Fatalf("member %s, %s: %v", m.id, q.Op, err)
			}
			if r.Code != wire.ErrCodeNotLeader || wire.NotLeaderAddr(r) != l.addr {
				t.Fatalf("member %s answered %s with code %d %q; want not the leader, try %s", m.id, q.Op, r.Code, r.Msg, l.addr)
			}
		}
		c.Close()

		one, err := client.New(ctx, client.Config{Namenodes: []string{m.addr}, Security: "none", DataSecurity: "none"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = one.Lookup(ctx, "/made-on-leader")
		one.Close()
		if !errors.Is(err, client.ErrNotLeader) || !strings.Contains(err.Error(), l.addr) {
			t.Fatalf("lookup through follower %s alone: %v; want ErrNotLeader naming %s", m.id, err, l.addr)
		}
	}

	g.waitCaughtUp()
	cmd := exec.Command(g.bin, "admin", "namenodes", "-json", "-namenode", strings.Join(g.addrs(), ","))
	cmd.Env = append(os.Environ(), "PLASMAFS_SECURITY=none", "PLASMAFS_DATA_SECURITY=none")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("plasma admin namenodes: %v\n%s", err, out)
	}
	var rows []struct {
		Addr, Role string
		Term, Lag  uint64
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("plasma admin namenodes -json: %v\n%s", err, out)
	}
	roles := map[string]int{}
	for _, r := range rows {
		roles[r.Role]++
		if r.Role == "leader" && r.Addr != l.addr {
			t.Fatalf("admin namenodes names %s the leader, not %s:\n%s", r.Addr, l.addr, out)
		}
		if r.Term == 0 || r.Lag != 0 {
			t.Fatalf("admin namenodes: term 0 or a lag after catching up:\n%s", out)
		}
	}
	if roles["leader"] != 1 || roles["follower"] != 2 {
		t.Fatalf("admin namenodes: roles %v, want one leader and two followers:\n%s", roles, out)
	}
}

// Issue 22: a client given the namenode list rides through a failover:
// after the leader's kill -9, its next lookup, read and commit succeed
// (it finds the new leader itself, waiting out the election).
func TestClientRidesThroughFailover(t *testing.T) {
	g := startGroup(t, 3, 1)
	ctx := context.Background()
	cl := g.client()
	defer cl.Close()
	if _, err := clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(ctx, 1, "before", 0); err != nil {
		t.Fatal(err)
	}
	g.kill(g.leader())
	if _, err := cl.Lookup(ctx, "/before"); err != nil {
		t.Fatalf("lookup after the failover: %v", err)
	}
	if _, err := clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(ctx, 1, "after", 0); err != nil {
		t.Fatalf("commit after the failover: %v", err)
	}
	if _, err := cl.Lookup(ctx, "/after"); err != nil {
		t.Fatal(err)
	}
}

// Issue 22: below a majority nothing is acknowledged, and the client is
// told why instead of waiting forever: with both followers killed, the
// leader steps down (its lease ends), commits fail, and once the
// outcome of those in flight is reported unknown, the error says the
// group lacks a majority.
func TestBelowMajorityCommitsFailSayingSo(t *testing.T) {
	g := startGroup(t, 3, 0)
	ctx := context.Background()
	l := g.leader()
	cl := g.client()
	defer cl.Close()
	if _, err := clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(ctx, 1, "before", 0); err != nil {
		t.Fatal(err)
	}
	for _, m := range g.members {
		if m != l {
			g.kill(m)
		}
	}
	var last error
	for i := 0; i < 5; i++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(cctx, 1, "below-majority", 0)
		cancel()
		if err == nil {
			t.Fatalf("a commit was acknowledged with only 1 of 3 namenodes up")
		}
		last = err
		if strings.Contains(err.Error(), "majority") {
			break
		}
	}
	if !strings.Contains(last.Error(), "majority") {
		t.Fatalf("commit below a majority: %v; want an error saying the group lacks a majority", last)
	}
	t.Logf("below a majority: %v", last)
}
