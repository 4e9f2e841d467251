package ha

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/namenode"
)

// link is a TCP proxy standing for the network between two members (one
// direction of dialing: member i's connections to member j's Raft port).
// Cut, it carries nothing, as a partition: bytes sent either way are
// dropped without a reset, and new connections are accepted but go
// nowhere. Healed, it closes every connection it held (they lost bytes)
// and forwards new ones again.
type link struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
}

func newLink(t *testing.T, target string) *link {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &link{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() {
		ln.Close()
		l.closeAll()
	})
	go l.serve()
	return l
}

func (l *link) addr() string { return l.ln.Addr().String() }

func (l *link) serve() {
	for {
		a, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		l.conns[a] = true
		cut := l.cut
		l.mu.Unlock()
		if cut {
			go l.copy(io.Discard, a, a, nil)
			continue
		}
		b, err := net.Dial("tcp", l.target)
		if err != nil {
			a.Close()
			continue
		}
		l.mu.Lock()
		l.conns[b] = true
		l.mu.Unlock()
		go l.copy(b, a, a, b)
		go l.copy(a, b, a, b)
	}
}

// copy forwards src to dst while the link is not cut and drops what it
// reads while it is; it closes both ends when src ends.
func (l *link) copy(dst io.Writer, src net.Conn, a, b net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.Lock()
			cut := l.cut
			l.mu.Unlock()
			if !cut {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					err = werr
				}
			}
		}
		if err != nil {
			a.Close()
			if b != nil {
				b.Close()
			}
			return
		}
	}
}

func (l *link) setCut(cut bool) {
	l.mu.Lock()
	l.cut = cut
	l.mu.Unlock()
	if !cut {
		l.closeAll()
	}
}

func (l *link) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
}

// link makes every member reach every other one through a link of its
// own (-raft-dial).
func (g *group) link() {
	g.t.Helper()
	g.links = map[*member]map[*member]*link{}
	for _, m := range g.members {
		g.links[m] = map[*member]*link{}
		var dial []string
		for _, o := range g.members {
			if o == m {
				continue
			}
			ra, err := namenode.RaftAddr(o.addr)
			if err != nil {
				g.t.Fatal(err)
			}
			l := newLink(g.t, ra)
			g.links[m][o] = l
			dial = append(dial, o.id+"="+l.addr())
		}
		m.extra = append(m.extra, "-raft-dial", strings.Join(dial, ","))
	}
}

// isolate cuts member m off from the others (both ways); heal joins
// everyone again.
func (g *group) isolate(m *member) {
	for o, l := range g.links[m] {
		l.setCut(true)
		g.links[o][m].setCut(true)
	}
}

func (g *group) heal() {
	for _, ls := range g.links {
		for _, l := range ls {
			l.setCut(false)
		}
	}
}

// clientOf connects to the namenode at addr alone.
func (g *group) clientOf(addr string) *client.Client {
	g.t.Helper()
	cl, err := client.New(context.Background(), client.Config{Namenodes: []string{addr}, Security: "none", DataSecurity: "none", User: "root"})
	if err != nil {
		g.t.Fatalf("client of %s: %v", addr, err)
	}
	return cl
}

func (m *member) String() string { return m.id }

// Issue 22: the leader cut off from the others (every Raft connection to
// and from it dropping everything) while clients given only its address
// keep committing to it, and clients with the whole list commit too. The
// other two elect a new leader and go on committing; the old leader
// acknowledges nothing it cannot have replicated and, once its lease has
// run out, refuses commits saying it is not the leader. After the
// network heals, the old leader rejoins as a follower and every member's
// own database holds every commit acknowledged to any client, before,
// during and after the partition.
func TestPartitionedLeaderAcknowledgesNothing(t *testing.T) {
	g := startGroupWith(t, 3, 0, groupOptions{Links: true})
	old := g.leader()
	var others []*member
	for _, m := range g.members {
		if m != old {
			others = append(others, m)
		}
	}
	onOld := startWritersWith(2, "old", func() *client.Client { return g.clientOf(old.addr) }, true)
	onAll := startWriters(g, 2, "all")
	onOld.waitAcked(t, 50)
	onAll.waitAcked(t, 50)

	g.isolate(old)
	atCut := onOld.count()
	l := g.leaderAmong(others...)
	t.Logf("member %s isolated; member %s elected", old.id, l.id)

	// The old leader refuses commits: a commit sent to it alone fails
	// with "not the leader" once its lease has run out. Any commit it
	// acknowledges meanwhile is checked below like every other one.
	probe := g.clientOf(old.addr)
	defer probe.Close()
	var probed []string
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		name := fmt.Sprintf("probe-%03d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := clientx.At(clientx.Auto(probe, clientx.Durable)).MkdirAt(ctx, 1, name, 0)
		cancel()
		if err == nil {
			probed = append(probed, name)
		} else if errors.Is(err, client.ErrNotLeader) {
			t.Logf("the isolated old leader: %v", err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the isolated old leader still does not answer 'not the leader' after 60s: %v", err)
		}
	}
	if st, err := g.status(old); err != nil || st.role == "leader" {
		t.Fatalf("the isolated old leader: %+v %v; want it to have stepped down", st, err)
	}
	ackedOld := onOld.finish()
	if onOld.refused == 0 {
		t.Fatalf("no client of the isolated old leader was told it is not the leader (%d unknown, other errors: %v)", onOld.unknown, onOld.other)
	}
	onAll.waitAcked(t, onAll.count()+50) // the majority commits on

	g.heal()
	onAll.waitAcked(t, onAll.count()+50)
	acked := append(append(ackedOld, onAll.finish()...), probed...)
	t.Logf("%d commits acknowledged; the isolated leader's clients: %d acknowledged after the cut (in flight at it), %d of unknown outcome, %d failed otherwise; its probe: %d acknowledged",
		len(acked), len(ackedOld)-atCut, onOld.unknown, len(onOld.other), len(probed))
	g.waitCaughtUp()
	if st, err := g.status(old); err != nil || st.role != "follower" {
		t.Fatalf("the old leader after healing: %+v %v; want a follower", st, err)
	}
	g.stopMembers()
	for _, m := range g.members {
		if n := missing(acked, rootNames(t, m)); n > 0 {
			t.Errorf("member %s's database lacks %d of %d acknowledged commits", m.id, n, len(acked))
		}
	}
}
