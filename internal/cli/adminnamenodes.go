package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/plasmafs/plasma/client"
)

func init() { adminSubcommands["namenodes"] = adminNamenodes }

// adminNamenodes shows each namenode of the configured list: its role in
// its group, term, applied index and lag behind the leader's commit index.
func adminNamenodes(ctx context.Context, args []string) error {
	f := newFlags("admin namenodes", "[-json]", `Show each namenode of the cluster's list (-namenode h1:p,h2:p, ~/.plasmafs): its id and
role in its namenode group (leader, follower, candidate; single without a group), the Raft
term, the last log entry it applied and its lag behind the leader's commit index.
Works without a leader (below a majority, during an election).`, true)
	out := newPrinter(f, "a JSON array of {addr, id, role, leader, term, applied, commit, lag, error}")
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
		Error   string `json:"error,omitempty"`
	}
	var rows []row
	down := 0
	for _, m := range members {
		r := row{Addr: m.Addr, ID: m.ID, Role: m.Role, Leader: m.Leader, Term: m.Term, Applied: m.Applied, Commit: m.Commit}
		if m.Err != nil {
			r.Role, r.Error = "unreachable", oneLine(m.Err)
			down++
		} else if commit > m.Applied {
			r.Lag = commit - m.Applied
		}
		rows = append(rows, r)
	}
	err = out.item(rows, func(w io.Writer) {
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
