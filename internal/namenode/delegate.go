package namenode

import (
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// opDelegate signs a credential delegated to the caller's user for job
// q.Path, for the public key q.Path2, valid q.Size nanoseconds (at most
// auth.MaxDelegation): what a MapReduce coordinator gives the task
// servers of its job instead of its own credential. The caller made the
// key, so no secret travels. Refused for unauthenticated and delegated
// callers (auth.Delegator.Delegate says why).
func (n *Namenode) opDelegate(_ *conn, _ *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if n.cfg.Delegator == nil {
		return nil, fail(wire.ErrCodeUnavailable, "delegate: this namenode issues no delegated credentials (start it with -delegation-credential)")
	}
	pub, err := auth.ParsePublicKey([]byte(q.Path2))
	if err != nil {
		return nil, fail(wire.ErrCodeInvalid, "delegate: %v", err)
	}
	if q.Size <= 0 {
		return nil, fail(wire.ErrCodeInvalid, "delegate: lifetime %d ns", q.Size)
	}
	chain, err := n.cfg.Delegator.Delegate(who, q.Path, pub, time.Now().Add(time.Duration(q.Size)))
	if err != nil {
		return nil, fail(wire.ErrCodePerm, "delegate: %v", err)
	}
	n.log.Info("credential delegated", "user", who.User, "job", q.Path, "lifetime", time.Duration(q.Size))
	return &wire.Response{Paths: []string{string(chain)}}, nil
}
