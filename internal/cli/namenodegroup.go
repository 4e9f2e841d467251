package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/namenode"
)

// A namenode started with -peers is a member of a namenode group
// (docs/design.md, "Replicated namenodes"): it serves as the namenode
// while it leads the group and answers "not the leader, try X" otherwise.

type groupOpts struct {
	peers    *string
	id       *string
	dir      *string
	election *time.Duration
	join     *string
	keep     *int
	snapInt  *time.Duration
	raftDial *string
}

func groupFlags(f *flags) groupOpts {
	return groupOpts{
		peers: f.String("peers", "", "make this namenode a member of a replicated namenode group: every member as id=host:port,...\n"+
			"(their client addresses; each member's Raft traffic uses the next port). Every member starts from a copy\n"+
			"of the same database ('plasma namenode backup') and is given the same list; the group is recorded\n"+
			"at the first start and a later start with another list is refused"),
		id:  f.String("id", "", "with -peers or -join: this member's id (in the -peers list)"),
		dir: f.String("group-dir", "", "with -peers: the member's Raft log and group record (default: the database's path + \".group\")"),
		raftDial: f.String("raft-dial", "", "with -peers: id=host:port,... where this member reaches those peers' Raft ports when not at\n"+
			"the port after their client addresses (through a proxy, a tunnel or address translation); each member may\n"+
			"reach the others its own way"),
		election: f.durationRange("election-timeout", 2*time.Second, 100*time.Millisecond, time.Minute, "with -peers: followers elect a new leader after this long without hearing from it"),
		keep: f.intRange("log-keep", 1<<16, 16, 1<<30, "with -peers or -join: Raft log entries (batches of commits) kept behind a snapshot of the store: a member that\n"+
			"missed more catches up from a copy of the leader's database (sent whole) instead of the log; a snapshot\n"+
			"is taken every quarter as many entries"),
		snapInt: f.durationRange("snapshot-interval", 2*time.Minute, 10*time.Millisecond, 24*time.Hour, "with -peers or -join: how often a member checks whether to take a snapshot (see -log-keep)"),
		join: f.String("join", "", "join the running namenode group of this id ('plasma admin namenodes' shows it) as a new member, with -id\n"+
			"and -listen (no -peers): the member waits until 'plasma admin namenode add ID ADDR' adds it, and the leader\n"+
			"seeds its database (-db, created if missing) with a copy of its own. Also how a member that lost its\n"+
			"Raft state comes back (after 'plasma admin namenode remove ID')"),
	}
}

func (g groupOpts) enabled() bool { return *g.peers != "" || *g.join != "" }

// createsDB tells whether the database is made here: a member joining a
// group gets a new one when it has none (the leader's copy replaces it).
func (g groupOpts) createsDB(db string) bool {
	if *g.join == "" {
		return false
	}
	local := meta.LocalPath(db)
	if local == "" {
		return false
	}
	_, err := os.Stat(local)
	return errors.Is(err, os.ErrNotExist)
}

// groupOnlyFlags mean something only to a member of a namenode group.
var groupOnlyFlags = []string{"id", "group-dir", "raft-dial", "election-timeout", "log-keep", "snapshot-interval"}

// groupMember is what the group flags name: the members, this one among
// them, and where it reaches the others' Raft ports.
type groupMember struct {
	peers    []namenode.Peer
	self     namenode.Peer
	raftDial map[string]string
}

// resolve checks the group flags before anything is opened (a refused
// -join must not leave a new database behind) and refuses group flags
// given to a single namenode, which would otherwise be ignored.
func (g groupOpts) resolve(f *flags, listen string) (groupMember, error) {
	if !g.enabled() {
		var set []string
		f.Visit(func(fl *flag.Flag) {
			if slices.Contains(groupOnlyFlags, fl.Name) {
				set = append(set, "-"+fl.Name)
			}
		})
		if len(set) > 0 {
			return groupMember{}, usagef("%s: only for a member of a namenode group; add -peers (forming a group) or -join (joining one), or leave %s out for a single namenode", strings.Join(set, ", "), strings.Join(set, ", "))
		}
		return groupMember{}, nil
	}
	listenSet := false
	f.Visit(func(fl *flag.Flag) { listenSet = listenSet || fl.Name == "listen" })
	peerList := *g.peers
	if *g.join != "" {
		if *g.peers != "" {
			return groupMember{}, usagef("-join and -peers: a member joining a running group learns its members from the leader; give -join, -id and -listen only")
		}
		if *g.id == "" || strings.ContainsAny(*g.id, "=, ") {
			return groupMember{}, usagef("-join needs -id, this member's id (a name without '=', ',' or spaces, not used by another member)")
		}
		peerList = *g.id + "=" + listen
	}
	peers, err := namenode.ParsePeers(peerList)
	if err != nil {
		return groupMember{}, usagef("-peers: %v", err)
	}
	if *g.id == "" {
		return groupMember{}, usagef("-peers needs -id, this member's id in the list")
	}
	i := slices.IndexFunc(peers, func(p namenode.Peer) bool { return p.ID == *g.id })
	if i < 0 {
		return groupMember{}, usagef("-id %s is not in -peers %s", *g.id, peerList)
	}
	if listenSet && listen != peers[i].Addr {
		return groupMember{}, usagef("-listen %s differs from this member's address in -peers (%s=%s)", listen, peers[i].ID, peers[i].Addr)
	}
	raftDial, err := namenode.ParseRaftDial(*g.raftDial)
	if err != nil {
		return groupMember{}, usagef("-raft-dial: %v", err)
	}
	return groupMember{peers: peers, self: peers[i], raftDial: raftDial}, nil
}

// runGroupMember runs this namenode as member m of a group until ctx
// ends or its store fails (failed: the store's state is unknown, leave it
// unclosed).
func runGroupMember(ctx context.Context, g groupOpts, m groupMember, db, logPath string, cfg namenode.Config, admin adminFlags, dnAdmin string) (failed bool, err error) {
	peers, self, raftDial := m.peers, &m.self, m.raftDial
	dir := *g.dir
	if dir == "" {
		if local := meta.LocalPath(db); local != "" {
			dir = local + ".group"
		} else {
			dir = strings.TrimSuffix(logPath, ".log") + ".group"
		}
	}
	log := cfg.Logger
	if _, err := os.Stat(logPath); err == nil {
		// The database was a single namenode's: what its commit log holds
		// goes into it first; the group's Raft log replaces the log.
		if err := namenode.ReplayLog(cfg.Store, logPath); err != nil {
			return false, err
		}
		if err := os.Rename(logPath, logPath+".before-group"); err != nil {
			return false, fmt.Errorf("set the commit log aside for the group's: %w", err)
		}
	}
	fatalc := make(chan error, 1)
	// Directory leases granted by earlier leaders may be live.
	cfg.Fresh = false
	grp, err := namenode.OpenGroup(namenode.GroupConfig{Self: self.ID, Peers: peers, Dir: dir, Store: cfg.Store, Join: *g.join,
		Security: cfg.Security, Credential: cfg.Credential, KeepEntries: uint64(*g.keep), SnapshotInterval: *g.snapInt,
		ElectionTimeout: *g.election, RaftDial: raftDial, Logger: log, Fatal: func(err error) {
			select {
			case fatalc <- err:
			default:
			}
		}})
	if err != nil {
		return false, err
	}
	// The admin port serves the member's place in the group, and the
	// namenode's metrics and status page while it leads.
	mm := namenode.NewMemberMetrics(grp)
	dm, err := startAdmin(admin, "namenode", cfg.Credential, log, mm)
	if err != nil {
		grp.Close()
		return false, err
	}
	defer dm.Close()
	pageStop := make(chan struct{})
	defer close(pageStop)
	if err := dm.serveStatus(mm.Status, dnAdmin, pageStop); err != nil {
		grp.Close()
		return false, err
	}
	ln, err := net.Listen("tcp", self.Addr)
	if err != nil {
		grp.Close()
		return false, fmt.Errorf("namenode: %w", err)
	}
	shared := namenode.Share(ln)
	defer shared.Close()
	cfg.Group = grp
	log.Info("namenode group member serving", "addr", self.Addr, "id", self.ID, "group", grp.ID())
	for {
		sb := namenode.NewStandby(grp, namenode.StandbyConfig{Security: cfg.Security, Credential: cfg.Credential, Logger: log})
		go sb.Serve(shared.View())
		// Wait to be elected.
		for !grp.IsLeader() {
			select {
			case <-ctx.Done():
				sb.Close()
				return false, grp.Close()
			case err := <-fatalc:
				sb.Close()
				return true, err
			case <-grp.Leading():
			}
		}
		term, err := grp.TakeOver()
		if err != nil {
			sb.Close()
			log.Warn("elected but could not take over", "err", err)
			continue
		}
		cfg.Term = term
		nn, err := namenode.New(cfg)
		if err != nil {
			sb.Close()
			grp.Close()
			return false, err
		}
		sb.Close()
		log.Info("leading the namenode group: serving", "addr", self.Addr, "group", grp.ID())
		errc := make(chan error, 1)
		go func() { errc <- nn.Serve(shared.View()) }()
		mm.Lead(nn)
		done, failed, err := leadUntilLost(ctx, grp, nn, errc, fatalc)
		mm.Lead(nil)
		if done {
			return failed, err
		}
		log.Warn("no longer the leader of the namenode group: answering 'not the leader' again")
	}
}

// leadUntilLost serves as the leader until the member loses the
// leadership (done false: go back to standby), ctx ends or a fatal error
// (done true).
func leadUntilLost(ctx context.Context, grp *namenode.Group, nn *namenode.Namenode, errc <-chan error, fatalc <-chan error) (done, failed bool, err error) {
	for {
		select {
		case <-ctx.Done():
			nn.Close()
			return true, false, grp.Close()
		case err := <-fatalc:
			nn.LostLeadership()
			<-errc
			return true, true, err
		case lead := <-grp.Leading():
			if lead {
				continue
			}
			nn.LostLeadership()
			<-errc
			nn.Close()
			return false, false, nil
		case err := <-errc:
			nn.Close()
			if !errors.Is(err, namenode.ErrStoreFailed) {
				grp.Close()
				return true, false, err
			}
			// A batch the group did not commit: this member lost its
			// leadership.
			return false, false, nil
		}
	}
}
