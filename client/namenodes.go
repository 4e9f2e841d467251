package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// A cluster's metadata may be served by a group of namenodes (one leader,
// the others answering "not the leader, try X"): Config.Namenodes then
// lists them all (-namenode h1:p,h2:p, or namenodes in the config file),
// and the client connects to the leader itself, again after a failover
// (its connection to the old leader closes; transactions open on it end
// with ErrConnLost, a commit in flight with ErrCommitUnknown).

// ErrNotLeader: the namenode asked is a member of a group that does not
// lead it (and the client could not find the leader).
var ErrNotLeader = errors.New("namenode is not the leader of its group")

func init() { codeErrors[wire.ErrCodeNotLeader] = ErrNotLeader }

// dialNamenode connects to the namenode that serves: the only one, or
// the leader of the group addrs lists (waiting out an election, up to
// rpc.FailoverWait).
func dialNamenode(ctx context.Context, addrs []string, level auth.Level, cred *auth.Credential) (*rpc.Conn, error) {
	return rpc.DialLeader(ctx, addrs, level, cred)
}

// leaderMoved handles a "not the leader" answer on the client's
// connection (the member it is connected to stopped leading): the
// connection is closed, so that the caller reconnects to the leader.
func (c *Client) leaderMoved(nn *rpc.Conn, r *wire.Response) error {
	nn.Close()
	return fmt.Errorf("%w: %s", rpc.ErrClosed, r.Msg)
}

// GroupMember is what one namenode of Config.Namenodes says of its place
// in its group (Role "single" for a namenode without a group).
type GroupMember struct {
	Addr   string
	ID     string
	Role   string // leader, follower, candidate, single
	Leader string // the leader's address as this member knows it
	Group  string
	Term   uint64
	// Applied is the last log entry this member applied; Commit the last
	// it knows committed, LastIndex the last in its log.
	Applied, LastIndex, Commit uint64
	// Members are the group's members as this one knows them, id=addr.
	Members []string
	Err     error // the member could not be asked
}

// NamenodeGroup asks every namenode of cfg about its group, then the
// members they name that cfg does not list (added since); it needs no
// leader (it works below a majority too).
func NamenodeGroup(ctx context.Context, cfg Config) []GroupMember {
	level, err := auth.ParseLevel(cmp.Or(cfg.Security, "privacy"))
	cred := cfg.Credential
	if err == nil && cred == nil && cfg.CredentialFile != "" {
		cred, err = auth.LoadCredential(cfg.CredentialFile)
	}
	var out []GroupMember
	asked := map[string]bool{}
	ask := func(a string) {
		asked[a] = true
		m := GroupMember{Addr: a, Err: err}
		if err == nil {
			m = askMember(ctx, a, level, cred)
		}
		out = append(out, m)
	}
	for _, a := range cfg.Namenodes {
		ask(a)
	}
	for i := 0; i < len(out); i++ {
		for _, p := range out[i].Members {
			if _, a, ok := strings.Cut(p, "="); ok && a != "" && !asked[a] {
				ask(a)
			}
		}
	}
	return out
}

func askMember(ctx context.Context, addr string, level auth.Level, cred *auth.Credential) GroupMember {
	m := GroupMember{Addr: addr}
	nn, err := rpc.Dial(ctx, addr, level, cred)
	if err != nil {
		m.Err = err
		return m
	}
	defer nn.Close()
	r, err := nn.Call(ctx, &wire.Request{Op: wire.OpNamenodes})
	if err == nil {
		err = respErr(r)
	}
	if err == nil && (len(r.Paths) < 4 || len(r.Counters) < 4) {
		err = fmt.Errorf("namenode %s: a short answer about its group (an older version?)", addr)
	}
	if err != nil {
		m.Err = err
		return m
	}
	m.ID, m.Role, m.Leader, m.Group = r.Paths[0], r.Paths[1], r.Paths[2], r.Paths[3]
	m.Term, m.Applied, m.LastIndex, m.Commit = r.Counters[0], r.Counters[1], r.Counters[2], r.Counters[3]
	m.Members = r.Paths[4:]
	return m
}
