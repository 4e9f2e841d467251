package namenode

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/connlimit"
	"github.com/plasmafs/plasma/internal/wire"
)

// Standby serves a group member's client port while it is not the
// leader: every request is answered "not the leader, try X" (wire.NotLeader)
// with the leader's address as the member knows it, except OpNamenodes,
// which tells the member's place in the group. Clients and datanodes
// given the list of namenodes go to the leader (internal/rpc.DialLeader).
type Standby struct {
	g    *Group
	srv  *rpcServer
	stop chan struct{}
	once sync.Once
}

// StandbyConfig is the part of Config a standby needs: how connections
// authenticate.
type StandbyConfig struct {
	Security   auth.Level
	Credential *auth.Credential
	Logger     *slog.Logger
}

// NewStandby returns the standby server of member g.
func NewStandby(g *Group, cfg StandbyConfig) *Standby {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Security == 0 {
		cfg.Security = auth.None
	}
	s := &Standby{g: g, stop: make(chan struct{})}
	s.srv = &rpcServer{h: s, security: cfg.Security, credential: cfg.Credential, idleTimeout: 30 * time.Minute,
		log: cfg.Logger, stop: s.stop, conns: map[*conn]struct{}{},
		limits: connlimit.New(4096, 256),
		listen: connlimit.Options{Name: "namenode standby", Log: cfg.Logger, PendingPerSource: 64,
			MaxOpen: 4096 + reserveConns + connlimit.DefaultMaxPending},
		frames: connlimit.NewBudget(wire.MaxFrame, requestMemoryWait)}
	return s
}

// Serve answers connections on ln until Close.
func (s *Standby) Serve(ln net.Listener) error { return s.srv.serve(ln) }

// Close stops the listeners and closes every connection.
func (s *Standby) Close() {
	s.once.Do(func() { close(s.stop) })
	s.srv.closeAll()
}

func (s *Standby) handleSafely(c *conn, q *wire.Request) (*wire.Response, error) {
	if q.Op == wire.OpNamenodes && q.Path == "" { // a change of members goes to the leader
		return s.g.status(), nil
	}
	if q.Op == wire.OpNamenodes && q.Path == "removed" {
		return s.g.removedByLeader(c.who, q), nil
	}
	return s.notLeader(), nil
}

func (s *Standby) notLeader() *wire.Response { return wire.NotLeader(s.g.LeaderAddr(), s.g.Members()) }

func (s *Standby) commit(c *conn, id, _, _ uint64, _ uint32, _ *wire.Response) {
	c.send(id, s.notLeader())
}

func (s *Standby) abortTxn(*conn, uint64) {}
func (s *Standby) connGone(*conn)         {}

// SharedListener hands one listening socket to one server after another
// (a member's standby, then its namenode when it leads, then a standby
// again): each View accepts until closed, without closing the socket.
type SharedListener struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{}
}

// Share starts accepting on ln.
func Share(ln net.Listener) *SharedListener {
	s := &SharedListener{ln: ln, conns: make(chan net.Conn), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case s.conns <- c:
			case <-time.After(10 * time.Second):
				c.Close() // nobody serving (between two servers for that long)
			}
		}
	}()
	return s
}

// View returns a listener over the shared socket; closing it leaves the
// socket open for the next View.
func (s *SharedListener) View() net.Listener {
	return &listenerView{s: s, closed: make(chan struct{})}
}

// Close closes the socket.
func (s *SharedListener) Close() error {
	err := s.ln.Close()
	<-s.done
	return err
}

type listenerView struct {
	s      *SharedListener
	closed chan struct{}
	once   sync.Once
}

func (v *listenerView) Accept() (net.Conn, error) {
	select {
	case c := <-v.s.conns:
		return c, nil
	case <-v.closed:
		return nil, net.ErrClosed
	case <-v.s.done:
		return nil, net.ErrClosed
	}
}

func (v *listenerView) Close() error {
	v.once.Do(func() { close(v.closed) })
	return nil
}

func (v *listenerView) Addr() net.Addr { return v.s.ln.Addr() }
