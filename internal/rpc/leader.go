package rpc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// FailoverWait bounds how long DialLeader looks for the leader of a
// namenode group: an election takes a few seconds.
const FailoverWait = 20 * time.Second

// DialLeader connects to the leader of a namenode group given the
// members' addresses (one address: Dial, as for a single namenode). It
// asks each in turn, follows a member's "not the leader, try X" answer,
// and goes round again, with backoff, while no member leads (an election
// under way), for at most FailoverWait or until ctx ends. The error then
// says what each member answered (fewer than a majority up: "knows of no
// leader").
func DialLeader(ctx context.Context, addrs []string, level auth.Level, cred *auth.Credential) (*Conn, error) {
	if len(addrs) == 1 {
		return Dial(ctx, addrs[0], level, cred)
	}
	if len(addrs) == 0 {
		return nil, errors.New("no namenode address")
	}
	deadline := time.Now().Add(FailoverWait)
	pause := 50 * time.Millisecond
	// What each member last answered (not leader, no leader known):
	// more telling than a later failure to connect as ctx runs out.
	answered := map[string]error{}
	for {
		last := map[string]error{}
		queue := slices.Clone(addrs)
		for len(queue) > 0 {
			a := queue[0]
			queue = queue[1:]
			if _, seen := last[a]; seen {
				continue
			}
			c, hint, answer, err := probe(ctx, a, level, cred)
			if err == nil {
				return c, nil
			}
			last[a] = err
			if answer {
				answered[a] = err
			}
			if hint != "" {
				if _, seen := last[hint]; !seen {
					queue = append([]string{hint}, queue...)
				}
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			var msgs []string
			for _, a := range addrs {
				if err := cmp.Or(answered[a], last[a]); err != nil {
					msgs = append(msgs, err.Error())
				}
			}
			return nil, fmt.Errorf("no leader among the namenodes %s: %s", strings.Join(addrs, ","), strings.Join(msgs, "; "))
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// probe connects to addr and keeps the connection if that namenode
// serves (a single namenode or a group's leader); otherwise it returns
// the leader the member names ("" if none).
func probe(ctx context.Context, addr string, level auth.Level, cred *auth.Credential) (c *Conn, leader string, answered bool, err error) {
	c, err = Dial(ctx, addr, level, cred)
	if err != nil {
		return nil, "", false, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := c.Keepalive(pctx, &wire.Request{Op: wire.OpPing}) // not counted as the caller's request
	if err != nil {
		c.Close()
		return nil, "", false, fmt.Errorf("namenode %s: %w", addr, err)
	}
	if r.Code == wire.OK {
		return c, "", true, nil
	}
	c.Close()
	return nil, wire.NotLeaderAddr(r), true, fmt.Errorf("namenode %s: %s", addr, r.Msg)
}

// FailWith marks the connection broken with err as the reason its later
// calls report (wrapped in ErrNotSent): a broken connection whose
// namenode could not be found again (no leader in the group, below a
// majority) then says why, not only that it broke.
func (c *Conn) FailWith(err error) {
	c.fail(err)
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}
