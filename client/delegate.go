package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// Delegate asks the namenode for a credential delegated to this client's
// user for job, valid for lifetime (the namenode caps it at
// auth.MaxDelegation): it names the same user and groups, but never acts
// as a superuser and cannot ask for further credentials. The key is made
// here; only its public half goes to the namenode.
func (c *Client) Delegate(ctx context.Context, job string, lifetime time.Duration) (*auth.Credential, error) {
	if c.cred == nil || c.level == auth.None {
		return nil, errors.New("a delegated credential needs an authenticated connection to the namenode (security level above none, with a credential)")
	}
	key, pub, err := auth.DelegationKey()
	if err != nil {
		return nil, err
	}
	r, err := c.call(ctx, &wire.Request{Op: wire.OpDelegate, Path: job, Path2: string(pub), Size: int64(lifetime)})
	if err != nil {
		return nil, err
	}
	if len(r.Paths) != 1 {
		return nil, fmt.Errorf("delegate: the namenode answered %d chains", len(r.Paths))
	}
	return auth.DelegatedCredential(key, []byte(r.Paths[0]), c.cred)
}

// Credential is the credential the client authenticates with (nil at
// security level none without one).
func (c *Client) Credential() *auth.Credential { return c.cred }

// Config is the configuration the client was made with, its defaults
// filled in.
func (c *Client) Config() Config { return c.cfg }
