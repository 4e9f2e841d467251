package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strings"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientx"
)

func init() {
	register("admin", "user add NAME [-group G[,G...]] [-superuser|-taskserver] [-o FILE] [-dir CLUSTERDIR] | stats [-json] | backup FILE | top | namenodes | namenode add ID ADDR|remove ID | datanodes | datanode drain|disable|enable|remove ID | balance", "administration: issue user credentials, show namenode counters, back up the metadata, watch it live, datanode service states", cmdAdmin)
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "admin"
}

// adminSubcommands are the subcommands of 'plasma admin' other than
// 'user add', each given the arguments after its name.
var adminSubcommands = map[string]func(ctx context.Context, args []string) error{
	"stats":     adminStats,
	"backup":    adminBackup,
	"top":       adminTop,
	"datanodes": adminDatanodes,
	"datanode":  adminDatanode,
	"balance":   adminBalance,
}

func cmdAdmin(ctx context.Context, args []string) error {
	if len(args) >= 1 {
		if sub, ok := adminSubcommands[args[0]]; ok {
			return sub(ctx, args[1:])
		}
	}
	if len(args) >= 1 && isHelpArg(args[0]) {
		fmt.Fprint(stdout, `usage: plasma admin SUBCOMMAND [options]   ('plasma admin SUBCOMMAND -help' for options)

  user add NAME   issue a credential for a user, signed by the cluster CA (on the machine holding the cluster's secrets)
  stats           show the namenode's request and commit counters
  backup FILE     write a consistent copy of the running namenode's metadata
  top             a live view of the namenode's operations, latencies and commits (from its /metrics)
  namenodes       each namenode of a replicated group: role, term, applied index, lag
  namenode add ID ADDR|remove ID
                  add a namenode (started with -join) to the group, or take a member out
  datanodes       list the datanodes: state, capacity, used, blocks, last heartbeat, copies, and the replication queue
  datanode drain|disable|enable|remove ID
                  move every replica off a datanode, stop or resume giving it new blocks,
                  take a drained (or dead) datanode out of the cluster for good
  balance         move replicas from the fullest datanodes to the emptiest (e.g. after adding one)
`)
		return nil
	}
	if len(args) < 2 || args[0] != "user" || args[1] != "add" {
		return usagef("'plasma admin user add NAME', 'plasma admin stats', 'plasma admin backup FILE', 'plasma admin datanodes', 'plasma admin datanode drain|disable|enable|remove ID' or 'plasma admin balance'")
	}
	f := newFlags("admin user add", "NAME [options]", "Issue a credential for user NAME, signed by the cluster CA. The file can be\ncopied to another machine and used there (PLASMAFS_CREDENTIAL) without a password.", false)
	groups := f.String("group", "", "groups, comma-separated (default: a group named like the user)")
	super := f.Bool("superuser", false, "issue a superuser credential (bypasses permission checks); the role is part of\nthe credential: no user name, not even root, makes a superuser without it")
	taskServer := f.Bool("taskserver", false, "issue a credential for a MapReduce task server ('plasma mr taskserver -credential'):\nit may serve TLS, and is an ordinary user in PlasmaFS")
	out := f.String("o", "", "output file (default NAME.pem in the current directory)")
	dir := f.String("dir", defaultClusterDir(), "cluster directory holding secrets/ (as for 'plasma cluster up')")
	if err := f.parse(args[2:]); err != nil {
		return err
	}
	if len(f.pos) != 1 {
		return usagef("wrong number of arguments")
	}
	name := f.pos[0]
	if strings.ContainsAny(name, "/\x00:") || len(name) > 64 || name == "" {
		return usagef("bad user name %q", name)
	}
	secrets, err := auth.LoadSecrets(filepath.Join(*dir, "secrets"))
	if err != nil {
		return fmt.Errorf("%w (is %s a cluster directory? use -dir)", err, *dir)
	}
	var gs []string
	if *groups != "" {
		gs = strings.Split(*groups, ",")
	}
	role := auth.RoleUser
	switch {
	case *super && *taskServer:
		return usagef("-superuser and -taskserver exclude each other")
	case *super:
		role = auth.RoleSuperuser
	case *taskServer:
		role = auth.RoleTaskServer
	}
	cred, err := secrets.Issue(name, role, gs)
	if err != nil {
		return err
	}
	if *out == "" {
		*out = name + ".pem"
	}
	if err := os.WriteFile(*out, cred.PEM(), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "credential for %s (groups %s, %s) written to %s\nuse it with: export PLASMAFS_CREDENTIAL=%s\n", name, strings.Join(cred.Identity.Groups, ","), role, *out, *out)
	return nil
}

// adminStats prints the namenode's request counters (the counter the
// random-read benchmark uses to show reads need no namenode).
func adminStats(ctx context.Context, args []string) error {
	f := newFlags("admin stats", "[-json]", "Show the namenode's request and commit counters, and how many additions to a\ndirectory waited for another client's lease on it (lease waits).", true)
	out := newPrinter(f, "one JSON object: requests, commits, batches, syncs, cpu_seconds, lease_waits and per_op {operation: requests}")
	return withClient(ctx, f, args, 0, 0, func(c *client.Client) error {
		s, err := clientx.NamenodeStats(ctx, c)
		if err != nil {
			return err
		}
		v := struct {
			Requests   uint64            `json:"requests"`
			Commits    uint64            `json:"commits"`
			Batches    uint64            `json:"batches"`
			Syncs      uint64            `json:"syncs"`
			CPU        float64           `json:"cpu_seconds"`
			LeaseWaits uint64            `json:"lease_waits"`
			PerOp      map[string]uint64 `json:"per_op"`
		}{s.Requests, s.Commits, s.Batches, s.Syncs, s.CPU.Seconds(), s.LeaseWaits, s.PerOp}
		return out.item(v, func(w io.Writer) {
			fmt.Fprintf(w, "requests: %d\ncommits:  %d\nbatches:  %d (%.2f commits per store write)\nfsyncs:   %d (%.2f commits per fsync)\n",
				s.Requests, s.Commits, s.Batches, float64(s.Commits)/max(1, float64(s.Batches)), s.Syncs, float64(s.Commits)/max(1, float64(s.Syncs)))
			fmt.Fprintf(w, "lease waits: %d (additions that waited for another client's directory lease)\n", s.LeaseWaits)
			ops := make([]string, 0, len(s.PerOp))
			for op := range s.PerOp {
				ops = append(ops, op)
			}
			sort.Strings(ops)
			for _, op := range ops {
				fmt.Fprintf(w, "  %-10s %d\n", op, s.PerOp[op])
			}
		})
	})
}

// adminBackup makes the running namenode write a consistent copy of its
// metadata.
func adminBackup(ctx context.Context, args []string) error {
	f := newFlags("admin backup", "FILE", `Make the namenode write a consistent copy of its metadata database to FILE, a
new file on the namenode's host (a relative FILE is taken from this command's
working directory). Commits wait while it is written. Superuser only.
To restore: stop the namenode, remove its database's -wal, -shm and .log files, and
copy FILE over the database (plasma namenode -db).`, true)
	return withClient(ctx, f, args, 1, 1, func(c *client.Client) error {
		path, err := filepath.Abs(f.pos[0])
		if err != nil {
			return err
		}
		if err := c.Backup(ctx, path); err != nil {
			return fmt.Errorf("backup to %s: %w", path, err)
		}
		fmt.Fprintf(stdout, "metadata backed up to %s (on the namenode's host)\n", path)
		return nil
	})
}
