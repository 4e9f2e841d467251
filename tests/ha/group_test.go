package ha

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/loopback"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// group is a namenode group of real processes on loopback (security level
// none) with datanodes registered with its leader.
type group struct {
	t       *testing.T
	bin     string
	dir     string
	members []*member
	dns     []*proc
	sec     *groupSecrets // nil: no tickets (data security level none)
	// memberArgs are more arguments every member is started with.
	memberArgs []string
	// links[i][j] carries member i's Raft traffic to member j (nil
	// unless groupOptions.Links).
	links map[*member]map[*member]*link
	// disks holds each member's database and Raft state on a power-cut
	// filesystem of its own (nil unless groupOptions.PowerCut).
	disks map[string]*memberDisk
}

// groupOptions varies startGroupWith.
type groupOptions struct {
	// Tickets: datanodes check tickets (data security level auth, a
	// ticket key shared by members and datanodes).
	Tickets bool
	// Prepare, if set, is given the formatted database before the
	// members' copies are made.
	Prepare func(db string)
	// Links: members reach each other's Raft ports through links
	// (partition_test.go), which the test can cut.
	Links bool
	// PowerCut: each member's database and Raft state are on a lossyfs
	// mount of its own (powercut_test.go), which the test can cut.
	PowerCut bool
	// MemberArgs are further arguments of every member.
	MemberArgs []string
}

// groupSecrets are the credentials and ticket key of a group whose
// datanodes check tickets.
type groupSecrets struct {
	namenode, datanode, user, ticketKey string
}

type proc struct {
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

type member struct {
	proc
	id    string
	addr  string
	db    string
	extra []string // further arguments of every start
}

func (p *proc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (g *group) start(p *proc, args ...string) {
	g.t.Helper()
	lf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		g.t.Fatal(err)
	}
	defer lf.Close()
	cmd := exec.Command(g.bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		g.t.Fatalf("start %v: %v", args, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(p.done) }()
}

// startGroup formats one database, copies it to every member (as an
// operator does) and starts n members and dns datanodes.
func startGroup(t *testing.T, n, dns int) *group {
	t.Helper()
	return startGroupWith(t, n, dns, groupOptions{})
}

func startGroupWith(t *testing.T, n, dns int, o groupOptions) *group {
	t.Helper()
	g := &group{t: t, bin: clustertest.Binary(t), dir: t.TempDir(), memberArgs: o.MemberArgs}
	if o.Tickets {
		g.sec = newGroupSecrets(t, filepath.Join(g.dir, "secrets"))
	}
	dbPath := func(i int) string { return filepath.Join(g.dir, fmt.Sprintf("nn%d.db", i)) }
	if o.PowerCut {
		dbPath = g.mountDisk
	}
	first := dbPath(1)
	s, err := meta.OpenSQLiteWith(first, meta.SQLiteOptions{Format: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if o.Prepare != nil {
		o.Prepare(first)
	}
	var peers []string
	for i := 1; i <= n; i++ {
		a, err := loopback.FreePair()
		if err != nil {
			t.Fatal(err)
		}
		db := first
		if i > 1 {
			db = dbPath(i)
		}
		m := &member{id: strconv.Itoa(i), addr: a, db: db, extra: o.MemberArgs}
		m.log = filepath.Join(g.dir, fmt.Sprintf("nn%d.out", i))
		if i > 1 {
			if out, err := exec.Command(g.bin, "namenode", "backup", "-db", first, "-o", m.db).CombinedOutput(); err != nil {
				t.Fatalf("copy the database: %v: %s", err, out)
			}
		}
		g.members = append(g.members, m)
		peers = append(peers, m.id+"="+m.addr)
	}
	g.syncDisks()
	t.Cleanup(g.stopAll)
	if o.Links {
		g.link()
	}
	for _, m := range g.members {
		g.startMember(m, strings.Join(peers, ","))
	}
	g.leader()
	for i := 0; i < dns; i++ {
		g.addDatanode()
	}
	g.waitLive(dns)
	return g
}

func (g *group) peers() string {
	var ps []string
	for _, m := range g.members {
		ps = append(ps, m.id+"="+m.addr)
	}
	return strings.Join(ps, ",")
}

func (g *group) startMember(m *member, peers string) {
	g.t.Helper()
	args := []string{"namenode", "-db", m.db, "-security", "none", "-peers", peers, "-id", m.id, "-log-level", "warn"}
	if g.sec != nil {
		args = append(args, "-data-security", "auth", "-credential", g.sec.namenode, "-ticket-key", g.sec.ticketKey)
	}
	g.start(&m.proc, append(args, m.extra...)...)
}

// addrs is the namenode list clients are given.
func (g *group) addrs() []string {
	var out []string
	for _, m := range g.members {
		out = append(out, m.addr)
	}
	return out
}

func (g *group) addDatanode() {
	g.t.Helper()
	i := len(g.dns) + 1
	vol := filepath.Join(g.dir, fmt.Sprintf("dn%d", i))
	if out, err := exec.Command(g.bin, "datanode", "init", "-fallocate", "-dir", vol, "-size", "64M").CombinedOutput(); err != nil {
		g.t.Fatalf("datanode init: %v: %s", err, out)
	}
	p := &proc{log: vol + ".out"}
	g.dns = append(g.dns, p)
	args := []string{"datanode", "-dir", vol, "-listen", clustertest.FreeAddr(g.t), "-namenode", strings.Join(g.addrs(), ","),
		"-heartbeat", "100ms", "-log-level", "warn", "-namenode-security", "none"}
	if g.sec != nil {
		args = append(args, "-security", "auth", "-credential", g.sec.datanode, "-ticket-key", g.sec.ticketKey)
	} else {
		args = append(args, "-security", "none")
	}
	g.start(p, args...)
}

func (g *group) stopAll() {
	if g.t.Failed() {
		for _, m := range g.members {
			b, _ := os.ReadFile(m.log)
			g.t.Logf("log of member %s:\n%s", m.id, b)
		}
	}
	for _, p := range g.dns {
		if p.running() {
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	for _, m := range g.members {
		if m.running() {
			m.cmd.Process.Kill()
			<-m.done
		}
	}
}

func (g *group) kill(m *member) {
	m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
}

// client connects with the whole namenode list.
func (g *group) client() *client.Client {
	g.t.Helper()
	cfg := client.Config{Namenodes: g.addrs(), Security: "none", DataSecurity: "none", User: "root"}
	if g.sec != nil {
		cfg.DataSecurity, cfg.CredentialFile = "auth", g.sec.user
	}
	cl, err := client.New(context.Background(), cfg)
	if err != nil {
		g.t.Fatalf("client: %v", err)
	}
	return cl
}

// memberStatus is a member's answer to OpNamenodes.
type memberStatus struct {
	role, leader                string
	term, applied, last, commit uint64
}

func (g *group) status(m *member) (memberStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, m.addr, auth.None, nil)
	if err != nil {
		return memberStatus{}, err
	}
	defer c.Close()
	r, err := c.Call(ctx, &wire.Request{Op: wire.OpNamenodes})
	if err != nil {
		return memberStatus{}, err
	}
	if r.Code != wire.OK || len(r.Paths) < 3 || len(r.Counters) < 4 {
		return memberStatus{}, fmt.Errorf("member %s: %s", m.id, r.Msg)
	}
	return memberStatus{role: r.Paths[1], leader: r.Paths[2], term: r.Counters[0], applied: r.Counters[1], last: r.Counters[2], commit: r.Counters[3]}, nil
}

// leader waits until one running member leads and serves.
func (g *group) leader() *member {
	g.t.Helper()
	return g.leaderAmong(g.members...)
}

// leaderAmong waits until one running member of ms leads and serves.
func (g *group) leaderAmong(ms ...*member) *member {
	g.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range ms {
			if !m.running() {
				continue
			}
			st, err := g.status(m)
			if err != nil || st.role != "leader" {
				continue
			}
			// Serving (not only elected): a ping is answered.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := rpc.Dial(ctx, m.addr, auth.None, nil)
			if err == nil {
				r, err := c.Call(ctx, &wire.Request{Op: wire.OpPing})
				c.Close()
				cancel()
				if err == nil && r.Code == wire.OK {
					return m
				}
				continue
			}
			cancel()
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	g.t.Fatalf("none of the members %v leads after 60s", ms)
	return nil
}

// waitCaughtUp waits until every running member has applied everything
// the leader committed (members not running are left out).
func (g *group) waitCaughtUp() {
	g.t.Helper()
	l := g.leader()
	ls, err := g.status(l)
	if err != nil {
		g.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, m := range g.members {
		for m.running() {
			st, err := g.status(m)
			if err == nil && st.applied >= ls.commit {
				break
			}
			if time.Now().After(deadline) {
				g.t.Fatalf("member %s has not applied the leader's commit index %d after 60s: %+v %v", m.id, ls.commit, st, err)
			}
			time.Sleep(20 * time.Millisecond) // polling a condition
		}
	}
}

func (g *group) waitLive(n int) {
	g.t.Helper()
	cl := g.client()
	defer cl.Close()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if s, err := cl.FsStat(context.Background()); err == nil && int(s.LiveDatanodes) == n {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	g.t.Fatalf("the leader does not report %d live datanodes after 60s", n)
}

// stopMembers stops every member cleanly (SIGTERM), so their stores hold
// what they applied.
func (g *group) stopMembers() {
	g.t.Helper()
	for _, m := range g.members {
		if m.running() {
			m.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, m := range g.members {
		if m.cmd != nil {
			<-m.done
		}
	}
}

// rootNames is what member m's own database holds in the root
// directory (the member stopped).
func rootNames(t *testing.T, m *member) map[string]bool {
	t.Helper()
	s, err := meta.OpenSQLiteWith(m.db, meta.SQLiteOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("member %s's database: %v", m.id, err)
	}
	defer s.Close()
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range snap.Entries {
		if e.Parent == 1 {
			out[e.Name] = true
		}
	}
	return out
}

// isUnknown tells a commit whose outcome the client could not learn.
func isUnknown(err error) bool { return errors.Is(err, client.ErrCommitUnknown) }
