package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/plasmafs/plasma/internal/loopback"
	"github.com/plasmafs/plasma/internal/namenode"
	"github.com/plasmafs/plasma/internal/supervisor"
)

// 'cluster up -namenodes N' (N > 1) runs a replicated namenode group
// (docs/design.md, "Replicated namenodes") on loopback: members nn1..nnN,
// each with its own database DIR/nnI.db (copies of the first, made when
// the cluster is), supervised like the other members. Clients, datanodes
// and the other members get the list of their addresses.

// groupMode tells whether the cluster's metadata is served by a group.
func (u *clusterUp) groupMode() bool { return u.settings.Namenodes > 1 }

// namenodeList is the namenode addresses clients and datanodes are given.
func (u *clusterUp) namenodeList() []string {
	if u.groupMode() {
		return u.settings.GroupAddrs
	}
	return []string{u.nnAddr}
}

// checkNamenodes checks -namenodes against what the cluster was made with.
func (u *clusterUp) checkNamenodes(given bool, n int, rec clusterSettings, made bool) error {
	recorded := max(rec.Namenodes, 1)
	switch {
	case made && given && n != recorded:
		return usagef("-namenodes %d: the cluster was made with %d (adding or removing namenodes is not supported yet)", n, recorded)
	case !made && n > 1 && u.store != storeSQLite:
		return usagef("-namenodes %d: a namenode group keeps its metadata in SQLite (-store sqlite)", n)
	case n != 1 && n != 3 && n != 5:
		return usagef("-namenodes %d: 1, or a group of 3 or 5", n)
	}
	if !made {
		u.settings.Namenodes = n
	}
	return nil
}

// chooseGroupAddrs keeps the members' recorded addresses (each with the
// next port free for Raft) or picks new ones.
func (u *clusterUp) chooseGroupAddrs() error {
	addrs := u.settings.GroupAddrs
	claimed := 0 // addrs[:claimed] are checked free and claimed already
	if u.given["namenode-addr"] {
		// -namenode-addr is nn1's: a new group's first member takes it;
		// a group formed already keeps its members' addresses (its
		// members refuse another list).
		switch {
		case len(addrs) == 0:
			raft, err := nextPort(u.nnAddr)
			if err != nil {
				return usagef("-namenode-addr %s: %v", u.nnAddr, err)
			}
			if !loopback.Claim(u.nnAddr) || !loopback.Claim(raft) {
				return fmt.Errorf("-namenode-addr %s (or %s, nn1's Raft port) is in use by another program: choose another", u.nnAddr, raft)
			}
			addrs, claimed = []string{u.nnAddr}, 1
		case addrs[0] != u.nnAddr:
			return usagef("-namenode-addr %s: the namenode group's members serve at %s (recorded in %s); a group formed already keeps its addresses",
				u.nnAddr, strings.Join(addrs, ","), filepath.Join(u.dir, clusterSettingsFile))
		}
	}
	for i := claimed; i < u.settings.Namenodes; i++ {
		if i < len(addrs) {
			raft, err := nextPort(addrs[i])
			if err != nil {
				return err
			}
			if !loopback.Claim(addrs[i]) || !loopback.Claim(raft) {
				return fmt.Errorf("namenode nn%d's address %s (or %s, its Raft port) is in use by another program; it is recorded in %s",
					i+1, addrs[i], raft, filepath.Join(u.dir, clusterSettingsFile))
			}
			continue
		}
		a, err := loopback.FreePair()
		if err != nil {
			return err
		}
		addrs = append(addrs, a)
	}
	u.settings.GroupAddrs = addrs
	u.nnAddr = addrs[0]
	u.settings.NamenodeAddr = addrs[0]
	return nil
}

func nextPort(addr string) (string, error) {
	i := strings.LastIndexByte(addr, ':')
	p, err := strconv.Atoi(addr[i+1:])
	if i < 0 || err != nil {
		return "", fmt.Errorf("bad namenode address %q", addr)
	}
	return addr[:i+1] + strconv.Itoa(p+1), nil
}

func (u *clusterUp) memberDB(i int) string { return filepath.Join(u.dir, fmt.Sprintf("nn%d.db", i)) }

// formatGroup makes the members' databases: the first as a single
// namenode's is made, the others copies of it, once, before the group
// first starts.
func (u *clusterUp) formatGroup(ctx context.Context) error {
	first := u.memberDB(1)
	if err := formatNewCluster(first, u.dir, u.n); err != nil {
		return err
	}
	_, err := os.Stat(first + ".group")
	formed := err == nil
	for i := 2; i <= u.settings.Namenodes; i++ {
		db := u.memberDB(i)
		if _, err := os.Stat(db); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if formed {
			return fmt.Errorf("namenode nn%d's database %s is missing: the group has run already, so a copy of nn1's now would not be where the group's log starts; "+
				"copy a current member's with 'plasma admin backup' and remove %s.group", i, db, db)
		}
		if err := cmdNamenodeBackup(ctx, []string{"-db", first, "-o", db}); err != nil {
			return err
		}
	}
	return nil
}

// startGroup starts the members and waits until each listens.
func (u *clusterUp) startGroup(ctx context.Context, sv *supervisor.Supervisor) error {
	var peers []string
	for i, a := range u.settings.GroupAddrs {
		peers = append(peers, fmt.Sprintf("%d=%s", i+1, a))
	}
	var started []int
	for i, a := range u.settings.GroupAddrs {
		// A member taken out with 'plasma admin namenode remove' refuses
		// to start with its state; the others still take the list the
		// group was formed with.
		gdir := u.memberDB(i+1) + ".group"
		if group, removed, err := namenode.RemovedFromGroup(gdir); err != nil {
			return err
		} else if removed {
			fmt.Fprintf(stderr, "namenode nn%d (%s) was removed from group %s ('plasma admin namenode remove'): not started; to bring it back as a new member, move %s away, start it with -join %s -id %d and 'plasma admin namenode add %d %s'\n",
				i+1, a, group, gdir, group, i+1, i+1, a)
			continue
		}
		started = append(started, i)
		args := []string{"namenode", "-listen", a, "-db", u.memberDB(i + 1), "-peers", strings.Join(peers, ","), "-id", strconv.Itoa(i + 1),
			"-cluster", u.name, "-blocksize", strconv.FormatInt(u.bs, 10),
			"-security", u.sec, "-data-security", u.dataSec, "-credential", u.nnCred, "-ticket-key", u.ticketKey, "-delegation-credential", u.delegCred}
		if u.relaxed {
			args = append(args, "-relaxed")
		}
		m := sv.Add(fmt.Sprintf("nn%d", i+1), "namenode", args)
		if err := sv.Start(m); err != nil {
			return err
		}
	}
	for _, i := range started {
		a := u.settings.GroupAddrs[i]
		if err := sv.WaitListening(ctx, a); err != nil {
			return fmt.Errorf("namenode nn%d did not start (see %s): %w", i+1, filepath.Join(u.dir, fmt.Sprintf("nn%d.log", i+1)), err)
		}
	}
	return nil
}
