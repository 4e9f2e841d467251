package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
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
	raftDial *string
}

func groupFlags(f *flags) groupOpts {
	return groupOpts{
		peers: f.String("peers", "", "make this namenode a member of a replicated namenode group: every member as id=host:port,...\n"+
			"(their client addresses; each member's Raft traffic uses the next port). Every member starts from a copy\n"+
			"of the same database ('plasma namenode backup') and is given the same list; the group is recorded\n"+
			"at the first start and a later start with another list is refused"),
		id:  f.String("id", "", "with -peers: this member's id in the list"),
		dir: f.String("group-dir", "", "with -peers: the member's Raft log and group record (default: the database's path + \".group\")"),
		raftDial: f.String("raft-dial", "", "with -peers: id=host:port,... where this member reaches those peers' Raft ports when not at\n"+
			"the port after their client addresses (through a proxy, a tunnel or address translation); each member may\n"+
			"reach the others its own way"),
		election: f.durationRange("election-timeout", 2*time.Second, 100*time.Millisecond, time.Minute, "with -peers: followers elect a new leader after this long without hearing from it"),
	}
}

func (g groupOpts) enabled() bool { return *g.peers != "" }

// runGroupMember runs this namenode as a group member until ctx ends or
// its store fails (failed: the store's state is unknown, leave it
// unclosed).
func runGroupMember(ctx context.Context, f *flags, g groupOpts, listen, db, logPath string, cfg namenode.Config) (failed bool, err error) {
	listenSet := false
	f.Visit(func(fl *flag.Flag) { listenSet = listenSet || fl.Name == "listen" })
	peers, err := namenode.ParsePeers(*g.peers)
	if err != nil {
		return false, usagef("-peers: %v", err)
	}
	if *g.id == "" {
		return false, usagef("-peers needs -id, this member's id in the list")
	}
	var self *namenode.Peer
	for i := range peers {
		if peers[i].ID == *g.id {
			self = &peers[i]
		}
	}
	if self == nil {
		return false, usagef("-id %s is not in -peers %s", *g.id, *g.peers)
	}
	if listenSet && listen != self.Addr {
		return false, usagef("-listen %s differs from this member's address in -peers (%s=%s)", listen, self.ID, self.Addr)
	}
	raftDial, err := namenode.ParseRaftDial(*g.raftDial)
	if err != nil {
		return false, usagef("-raft-dial: %v", err)
	}
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
	grp, err := namenode.OpenGroup(namenode.GroupConfig{Self: self.ID, Peers: peers, Dir: dir, Store: cfg.Store,
		ElectionTimeout: *g.election, RaftDial: raftDial, Logger: log, Fatal: func(err error) {
			select {
			case fatalc <- err:
			default:
			}
		}})
	if err != nil {
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
		if done, failed, err := leadUntilLost(ctx, grp, nn, errc, fatalc); done {
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
