package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/plasmafs/plasma/client"
)

func init() {
	adminSubcommands["namenodes"] = adminNamenodes
	adminSubcommands["namenode"] = adminNamenode
}

// adminNamenode changes the members of the namenode group.
func adminNamenode(ctx context.Context, args []string) error {
	f := newFlags("admin namenode", "add ID ADDR | remove ID", `Change the members of the cluster's namenode group (on its leader). Superuser only.
  add ID ADDR  add the namenode serving clients at ADDR (Raft on the next port),
               started beforehand with 'plasma namenode -join GROUP -id ID -listen ADDR
               -db FILE' (GROUP: 'plasma admin namenodes'). It joins without a vote, gets
               a copy of the leader's database and the log after it, and once it has
               caught up it becomes a voter: the command returns then (it may take
               minutes for a large namespace). Refused if ID or ADDR is a member
               already, or the namenode at ADDR is not waiting to join this group.
  remove ID    take member ID out of the group (a dead one too). Refused when the
               voting members left that answer would be fewer than a majority (the
               group could commit nothing). The leader is not removed: it hands the
               leadership to another member, and you run the command again. Stop
               the removed namenode afterwards (a live one is told, and refuses to
               start again with its state); it comes back as a new member, with
               -join, after its group directory (DB.group) is moved away.
To replace a dead member: start the new one with -join, add it, then remove the
dead one. A member whose disk lost its Raft state comes back the same way.`, true)
	return withClient(ctx, f, args, 2, 3, func(c *client.Client) error {
		var m client.GroupMember
		var err error
		switch op := f.pos[0]; {
		case op == "add" && len(f.pos) == 3:
			m, err = c.AddNamenode(ctx, f.pos[1], f.pos[2])
		case op == "remove" && len(f.pos) == 2:
			m, err = c.RemoveNamenode(ctx, f.pos[1])
		case op == "add" || op == "remove":
			return usagef("want 'add ID ADDR' or 'remove ID'")
		default:
			return usagef("unknown namenode operation %q (add or remove)", op)
		}
		if err != nil {
			return fmt.Errorf("namenode %s: %w", f.pos[1], err)
		}
		fmt.Fprintf(stdout, "namenode group %s: members %s\n", m.Group, strings.Join(m.Members, ","))
		return nil
	})
}

// adminNamenodes shows each namenode of the configured list: its role in
// its group, term, applied index and lag behind the leader's commit index.
func adminNamenodes(ctx context.Context, args []string) error {
	f := newFlags("admin namenodes", "[-json]", `Show each namenode of the cluster's list (-namenode h1:p,h2:p, ~/.plasmafs): its id and
role in its namenode group (leader, follower, candidate; nonvoter while it catches up after
'plasma admin namenode add', joining before, removed after 'remove'; single without a group),
the Raft term, the last log entry it applied and its lag behind the leader's commit index,
and the group's id (what a new member's -join names). Members that the listed namenodes
name but the list lacks (added since) are asked too.
Works without a leader (below a majority, during an election).`, true)
	out := newPrinter(f, "a JSON array of {addr, id, role, leader, term, applied, commit, lag, group, error}")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := needArgs(f, 0, 0); err != nil {
		return err
	}
	cfg, err := client.LoadConfig(f.cluster, f.namenodes)
	if err != nil {
		return err
	}
	members := client.NamenodeGroup(ctx, cfg)
	var commit uint64
	for _, m := range members {
		if m.Err == nil && m.Role == "leader" {
			commit = max(commit, m.Commit)
		}
	}
	type row struct {
		Addr    string `json:"addr"`
		ID      string `json:"id"`
		Role    string `json:"role"`
		Leader  string `json:"leader"`
		Term    uint64 `json:"term"`
		Applied uint64 `json:"applied"`
		Commit  uint64 `json:"commit"`
		Lag     uint64 `json:"lag"`
		Group   string `json:"group,omitempty"`
		Error   string `json:"error,omitempty"`
	}
	var rows []row
	down := 0
	for _, m := range members {
		r := row{Addr: m.Addr, ID: m.ID, Role: m.Role, Leader: m.Leader, Term: m.Term, Applied: m.Applied, Commit: m.Commit, Group: m.Group}
		if m.Err != nil {
			r.Role, r.Error = "unreachable", oneLine(m.Err)
			down++
		} else if commit > m.Applied {
			r.Lag = commit - m.Applied
		}
		rows = append(rows, r)
	}
	err = out.item(rows, func(w io.Writer) {
		groups := map[string]bool{}
		for _, r := range rows {
			if r.Group != "" && !groups[r.Group] {
				groups[r.Group] = true
				fmt.Fprintf(w, "namenode group %s\n", r.Group)
			}
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ADDR\tID\tROLE\tTERM\tAPPLIED\tLAG\tLEADER")
		for _, r := range rows {
			if r.Error != "" {
				fmt.Fprintf(tw, "%s\t-\tunreachable\t-\t-\t-\t%s\n", r.Addr, r.Error)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", r.Addr, r.ID, r.Role, r.Term, r.Applied, r.Lag, r.Leader)
		}
		tw.Flush()
	})
	if err == nil && down > 0 {
		return fmt.Errorf("%d of %d namenodes unreachable", down, len(rows))
	}
	return err
}
