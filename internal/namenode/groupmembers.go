package namenode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// Changes of a group's members ('plasma admin namenode add|remove', on
// the leader): the library's membership changes (one at a time, each an
// entry of the log), checked first so that bad input is refused with what
// to do instead of leaving the group without a majority.

// memberStatus is what a member answers about its place in its group
// (OpNamenodes).
type memberStatus struct {
	id, role, group string
	applied         uint64
}

// askMember asks the namenode at addr about its group.
func askMember(ctx context.Context, addr string, level auth.Level, cred *auth.Credential) (memberStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, addr, level, cred)
	if err != nil {
		return memberStatus{}, err
	}
	defer c.Close()
	r, err := c.Call(ctx, &wire.Request{Op: wire.OpNamenodes})
	if err != nil {
		return memberStatus{}, err
	}
	if r.Code != wire.OK {
		return memberStatus{}, errors.New(r.Msg)
	}
	if len(r.Paths) < 4 || len(r.Counters) < 4 {
		return memberStatus{}, fmt.Errorf("namenode %s: a short answer about its group (an older version?)", addr)
	}
	return memberStatus{id: r.Paths[0], role: r.Paths[1], group: r.Paths[3], applied: r.Counters[1]}, nil
}

// checkNoRunningGroup refuses a member's first start (no group record)
// with -peers when one of its peers answers for a group of another id:
// this member lost its record (and with it its Raft state: it must not
// vote with what it lost), or its -peers or database are not the
// group's. Peers not up are not asked again: a group formed without them
// has the same id.
func checkNoRunningGroup(cfg GroupConfig, namespace string, logSeq uint64) error {
	if cfg.Join != "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "group")); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	want := groupID(namespace, cfg.Peers, logSeq)
	for _, p := range cfg.Peers {
		if p.ID == cfg.Self {
			continue
		}
		st, err := askMember(context.Background(), p.Addr, cfg.Security, cfg.Credential)
		if err != nil || st.group == "" || st.group == want {
			continue
		}
		return fmt.Errorf("namenode group %s runs already (member %s at %s answers), and this member has no record of it in %s: "+
			"its Raft state is lost (or its -peers or database differ from the group's), and it must not vote with lost state. "+
			"Bring it back as a new member: 'plasma admin namenode remove %s' if the group still lists it, start it with -join %s -id %s (no -peers), "+
			"then 'plasma admin namenode add %s %s'", st.group, st.id, p.Addr, cfg.Dir, cfg.Self, st.group, cfg.Self, cfg.Self, selfAddr(cfg))
	}
	return nil
}

func selfAddr(cfg GroupConfig) string {
	for _, p := range cfg.Peers {
		if p.ID == cfg.Self {
			return p.Addr
		}
	}
	return "ADDR"
}

// memberWait bounds how long an added member may take to catch up
// before it becomes a voter.
const memberWait = 10 * time.Minute

// configTimeout bounds the library's wait to start a change of members.
const configTimeout = 30 * time.Second

// AddMember adds namenode id, serving clients at addr and started with
// -join, to the group: first without a vote while it catches up (from a
// copy of the leader's store and the log), then as a voter, so that a
// member still catching up never counts in the majority. Adding a
// non-voting member again makes it a voter once caught up. Leader only.
func (g *Group) AddMember(ctx context.Context, id, addr string) error {
	if id == "" || strings.ContainsAny(id, "=, \t\n") {
		return fail(wire.ErrCodeInvalid, "member id %q: want a name without '=', ',' or spaces", id)
	}
	ra, err := RaftAddr(addr)
	if err != nil {
		return fail(wire.ErrCodeInvalid, "member address: %v", err)
	}
	conf := g.configuration()
	for _, s := range conf.Servers {
		switch {
		case string(s.ID) == id && string(s.Address) != ra:
			return fail(wire.ErrCodeExists, "namenode %s is a member already, at %s: remove it first to give it another address", id, clientAddr(string(s.Address)))
		case string(s.ID) == id && s.Suffrage == raft.Voter:
			return fail(wire.ErrCodeExists, "namenode %s is a member already ('plasma admin namenodes')", id)
		case string(s.ID) != id && string(s.Address) == ra:
			return fail(wire.ErrCodeExists, "address %s is member %s's", addr, s.ID)
		}
	}
	if first, err := g.logs.FirstIndex(); err != nil || first == 1 {
		return fail(wire.ErrCodeUnavailable, "this group's log still starts at its formation (a group formed by an earlier version): "+
			"a new member cannot be seeded from a copy of the leader's store; form the group again from a backup to add members")
	}
	st, err := askMember(ctx, addr, g.cfg.Security, g.cfg.Credential)
	switch {
	case err != nil:
		return fail(wire.ErrCodeUnavailable, "namenode %s at %s does not answer (%v): start it first with 'plasma namenode -join %s -id %s -listen %s -db FILE'",
			id, addr, err, g.file.Group, id, addr)
	case st.group != g.file.Group:
		return fail(wire.ErrCodeInvalid, "the namenode at %s is not waiting to join group %s (it answers for group %q, as %s): start it with -join %s",
			addr, g.file.Group, st.group, st.role, g.file.Group)
	case st.id != id:
		return fail(wire.ErrCodeInvalid, "the namenode at %s is member %s, not %s", addr, st.id, id)
	}
	if err := g.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(ra), 0, configTimeout).Error(); err != nil {
		return g.changeFailed("add", id, err)
	}
	g.cfg.Logger.Info("namenode group: member added without a vote, catching up", "id", id, "addr", addr)
	if err := g.waitCaughtUp(ctx, id, addr); err != nil {
		return err
	}
	if err := g.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(ra), 0, configTimeout).Error(); err != nil {
		return g.changeFailed("make a voter of", id, err)
	}
	g.cfg.Logger.Info("namenode group: member added", "id", id, "addr", addr)
	return nil
}

// waitCaughtUp waits until member id has applied every entry the group
// committed when the wait began.
func (g *Group) waitCaughtUp(ctx context.Context, id, addr string) error {
	target := g.raft.AppliedIndex()
	deadline := time.Now().Add(memberWait)
	for {
		st, err := askMember(ctx, addr, g.cfg.Security, g.cfg.Credential)
		if err == nil && st.applied >= target {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil || !g.IsLeader() {
			return fail(wire.ErrCodeUnavailable, "namenode %s was added without a vote but has not caught up with entry %d after %v (%v): "+
				"see its log; 'plasma admin namenode add %s %s' again makes it a voter once it has", id, target, memberWait, err, id, addr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // polling the member's progress
		}
	}
}

// RemoveMember removes member id from the group, unless the voting
// members left could not form a majority among those that answer. The
// leader itself is not removed: it hands the leadership to another
// member, and the command is run again. Leader only.
func (g *Group) RemoveMember(ctx context.Context, id string) error {
	conf := g.configuration()
	i := slices.IndexFunc(conf.Servers, func(s raft.Server) bool { return string(s.ID) == id })
	if i < 0 {
		return fail(wire.ErrCodeNotFound, "no namenode %q in the group (members: %s)", id, formatPeers(peersOf(conf)))
	}
	if id == g.cfg.Self {
		if err := g.raft.LeadershipTransfer().Error(); err != nil {
			return fail(wire.ErrCodeUnavailable, "namenode %s leads the group and could not hand the leadership to another member: %v", id, err)
		}
		return fail(wire.ErrCodeUnavailable, "namenode %s led the group: it handed the leadership to another member; run the command again to remove it", id)
	}
	if conf.Servers[i].Suffrage == raft.Voter {
		voters, live := 0, 0
		var down []string
		for _, s := range conf.Servers {
			if s.Suffrage != raft.Voter || string(s.ID) == id {
				continue
			}
			voters++
			if string(s.ID) == g.cfg.Self {
				live++
				continue
			}
			if st, err := askMember(ctx, clientAddr(string(s.Address)), g.cfg.Security, g.cfg.Credential); err == nil && st.group == g.file.Group {
				live++
			} else {
				down = append(down, string(s.ID))
			}
		}
		if live < voters/2+1 {
			return fail(wire.ErrCodeUnavailable, "removing namenode %s would leave %d voting members of which %d answer (down: %s): fewer than the %d a majority needs, "+
				"and the group could commit nothing. Bring members back, or add new ones first", id, voters, live, strings.Join(down, ", "), voters/2+1)
		}
	}
	if err := g.raft.RemoveServer(raft.ServerID(id), 0, configTimeout).Error(); err != nil {
		return g.changeFailed("remove", id, err)
	}
	g.cfg.Logger.Info("namenode group: member removed", "id", id)
	g.tellRemoved(ctx, clientAddr(string(conf.Servers[i].Address)))
	return nil
}

// tellRemoved tells a member it was removed (the library stops sending it
// anything at once, so it would not learn it from the log), so that it
// says so and refuses to start again with its state. Best effort: a dead
// member is not told.
func (g *Group) tellRemoved(ctx context.Context, addr string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := rpc.Dial(ctx, addr, g.cfg.Security, g.cfg.Credential)
	if err != nil {
		return
	}
	defer c.Close()
	c.Call(ctx, &wire.Request{Op: wire.OpNamenodes, Path: "removed", Pref: []string{g.file.Group}})
}

// removedByLeader answers a leader telling this member (standing by) it
// was removed from the group: only a namenode may say so.
func (g *Group) removedByLeader(who *auth.Identity, q *wire.Request) *wire.Response {
	if who != nil && who.Role != auth.RoleNamenode {
		return &wire.Response{Code: wire.ErrCodePerm, Msg: "only the group's leader may tell a member it was removed"}
	}
	if len(q.Pref) != 1 || q.Pref[0] != g.file.Group {
		return &wire.Response{Code: wire.ErrCodeInvalid, Msg: fmt.Sprintf("this member belongs to group %s, not %v", g.file.Group, q.Pref)}
	}
	g.fmu.Lock()
	g.file.Removed = true
	gf := g.file
	g.fmu.Unlock()
	if err := writeGroupFile(g.cfg.Dir, gf); err != nil {
		return &wire.Response{Code: wire.ErrCodeInternal, Msg: err.Error()}
	}
	g.cfg.Logger.Warn("this member was removed from the namenode group ('plasma admin namenode remove'): stop it; it comes back only as a new member (-join)", "group", gf.Group, "id", g.cfg.Self)
	return g.status()
}

func (g *Group) changeFailed(what, id string, err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return fail(wire.ErrCodeUnavailable, "%s namenode %s: this namenode lost the leadership of the group; run the command again", what, id)
	}
	return fail(wire.ErrCodeUnavailable, "%s namenode %s: %v", what, id, err)
}

// opMembers answers OpNamenodes "add" (Pref: id, address) and "remove"
// (Pref: id) on the leader, superuser only, from its own goroutine: a
// member being added may take minutes to catch up.
func (n *Namenode) opMembers(c *conn, q *wire.Request) (*wire.Response, error) {
	if who := c.who; who != nil && !who.Super() {
		return nil, fail(wire.ErrCodePerm, "only the superuser may change the members of the namenode group")
	}
	g := n.cfg.Group
	if g == nil {
		return nil, fail(wire.ErrCodeInvalid, "this namenode is not a member of a group (started without -peers)")
	}
	var change func(ctx context.Context) error
	switch {
	case q.Path == "add" && len(q.Pref) == 2:
		change = func(ctx context.Context) error { return g.AddMember(ctx, q.Pref[0], q.Pref[1]) }
	case q.Path == "remove" && len(q.Pref) == 1:
		change = func(ctx context.Context) error { return g.RemoveMember(ctx, q.Pref[0]) }
	default:
		return nil, fail(wire.ErrCodeInvalid, "namenode group: unknown change %q with %d arguments (add ID ADDR, remove ID)", q.Path, len(q.Pref))
	}
	return nil, &answersLater{func(id uint64) {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			var resp *wire.Response
			if err := change(context.Background()); err != nil {
				resp = toResponse(err)
			} else {
				resp = g.status()
			}
			c.sendAsync(id, resp)
		}()
	}}
}
