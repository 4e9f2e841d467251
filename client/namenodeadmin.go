package client

import (
	"context"
	"fmt"

	"github.com/plasmafs/plasma/internal/wire"
)

// AddNamenode adds namenode id, serving at addr and started with -join,
// to the cluster's namenode group; it returns once the new member has
// caught up and votes (superuser only). RemoveNamenode removes member id.
// Both answer with the leader's view of the group after the change.
func (c *Client) AddNamenode(ctx context.Context, id, addr string) (GroupMember, error) {
	return c.changeNamenodes(ctx, "add", id, addr)
}

// RemoveNamenode removes member id from the cluster's namenode group
// (superuser only); refused when the voting members left that answer
// would be fewer than a majority.
func (c *Client) RemoveNamenode(ctx context.Context, id string) (GroupMember, error) {
	return c.changeNamenodes(ctx, "remove", id)
}

func (c *Client) changeNamenodes(ctx context.Context, op string, args ...string) (GroupMember, error) {
	r, err := c.call(ctx, &wire.Request{Op: wire.OpNamenodes, Path: op, Pref: args})
	if err != nil {
		return GroupMember{}, err
	}
	if len(r.Paths) < 4 || len(r.Counters) < 4 {
		return GroupMember{}, fmt.Errorf("namenode group: a short answer (an older version?)")
	}
	return GroupMember{ID: r.Paths[0], Role: r.Paths[1], Leader: r.Paths[2], Group: r.Paths[3], Term: r.Counters[0],
		Applied: r.Counters[1], LastIndex: r.Counters[2], Commit: r.Counters[3], Members: r.Paths[4:]}, nil
}
