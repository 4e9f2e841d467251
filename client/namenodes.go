package client

import (
	"context"
	"errors"
	"fmt"

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
