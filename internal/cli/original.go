// Commands the original plasma tool had: params (the client's effective
// cluster parameters) and admin_table (the datanode table).

package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

func init() {
	register("params", "[-json]", "show the effective cluster parameters of this client", cmdParams)
	register("admin_table", "[-json] [datanodes]", "show the datanode table (read-only)", cmdAdminTable)
	aliases["admin-table"] = "admin_table"
	aliases["admintable"] = "admin_table"
}

// jsonParams is 'plasma params -json'; the field names are interface.
type jsonParams struct {
	Cluster          string   `json:"cluster"`
	NamenodeCluster  string   `json:"namenode_cluster"`
	ConfigSource     string   `json:"config_source"`
	Namenodes        []string `json:"namenodes"`
	Namenode         string   `json:"namenode"`
	User             string   `json:"user"`
	Group            string   `json:"group"`
	Credential       string   `json:"credential"`
	Security         string   `json:"security"`
	NamenodeSecurity string   `json:"namenode_security"`
	DataSecurity     string   `json:"data_security"`
	Blocksize        uint32   `json:"blocksize"`
	Replication      int      `json:"replication"`
	Datanodes        uint64   `json:"datanodes"`
	LiveDatanodes    uint64   `json:"live_datanodes"`
	ShortCircuit     bool     `json:"short_circuit"`
	TaskServers      []string `json:"taskservers"`
}

func cmdParams(ctx context.Context, args []string) error {
	f := newFlags("params", "[-json]", `Show the cluster parameters this client uses, and where they come from: the
cluster and its namenodes (from -cluster/-namenode, $PLASMAFS_CLUSTER and
$PLASMAFS_NAMENODES, or the configuration file), the namenode answering, the
identity and credential, the security levels, and what the namenode reports:
block size, default replication, datanodes.`, true)
	out := newPrinter(f, "one JSON object: cluster, namenode_cluster, config_source, namenodes, namenode, user, group,\ncredential, security, namenode_security, data_security, blocksize, replication, datanodes,\nlive_datanodes, short_circuit, taskservers")
	return withClient(ctx, f, args, 0, 0, func(c *client.Client) error {
		cfg := c.Config()
		s, err := c.FsStat(ctx)
		if err != nil {
			return err
		}
		v := jsonParams{Cluster: cfg.Cluster, NamenodeCluster: s.NamenodeCluster, ConfigSource: cfg.Source, Namenodes: cfg.Namenodes,
			Namenode: clientx.NamenodeAddr(c), User: cfg.User, Group: cfg.Group, Credential: cfg.CredentialFile,
			Security: cfg.Security, NamenodeSecurity: s.NamenodeLevel, DataSecurity: cfg.DataSecurity,
			Blocksize: s.Blocksize, Replication: s.DefaultRep, Datanodes: s.Datanodes, LiveDatanodes: s.LiveDatanodes,
			ShortCircuit: !cfg.NoShortCircuit, TaskServers: taskServersOf(cfg)}
		if v.Cluster == "" {
			v.Cluster = v.NamenodeCluster
		}
		return out.item(v, func(w io.Writer) { printParams(w, v) })
	})
}

// taskServersOf returns the MapReduce task servers the configuration
// file lists for cfg's cluster (none when the cluster came from elsewhere),
// as 'plasma mr run' finds them.
func taskServersOf(cfg client.Config) []string {
	if !strings.HasPrefix(cfg.Source, "/") {
		return nil
	}
	ts, _, _ := clusterTaskServers(cfg.Cluster)
	return ts
}

func printParams(w io.Writer, v jsonParams) {
	orNone := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return escapeName(s)
	}
	rep := fmt.Sprint(v.Replication)
	if v.Replication == 0 {
		rep = "(not reported by the namenode)"
	}
	lines := [][2]string{
		{"cluster", orNone(v.Cluster)},
		{"namenode cluster", orNone(v.NamenodeCluster)},
		{"configured by", orNone(v.ConfigSource)},
		{"namenodes", escapeName(strings.Join(v.Namenodes, ","))},
		{"namenode", escapeName(v.Namenode)},
		{"user", escapeName(v.User)},
		{"group", escapeName(v.Group)},
		{"credential", orNone(v.Credential)},
		{"security", fmt.Sprintf("%s (the namenode accepts %s and stronger)", v.Security, orNone(v.NamenodeSecurity))},
		{"data security", v.DataSecurity},
		{"blocksize", fmt.Sprint(v.Blocksize)},
		{"replication", rep},
		{"datanodes", fmt.Sprintf("%d (%d alive)", v.Datanodes, v.LiveDatanodes)},
		{"short-circuit", map[bool]string{true: "on (local blocks through the datanode's shared file)", false: "off"}[v.ShortCircuit]},
		{"taskservers", orNone(strings.Join(v.TaskServers, ","))},
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%-17s %s\n", l[0]+":", l[1])
	}
}

type jsonTableRow struct {
	ID       uint32 `json:"id"`
	Identity string `json:"identity"`
	Addr     string `json:"addr"`
	State    string `json:"state"`
	Capacity uint64 `json:"capacity"`
	Used     uint64 `json:"used"`
	Alive    bool   `json:"alive"`
}

func cmdAdminTable(ctx context.Context, args []string) error {
	f := newFlags("admin_table", "[-json] [datanodes]", `Show an administrative table of the namenode. The only table is "datanodes"
(the default): one row per datanode volume with its id, identity, data address,
state (alive, dead or disabled), capacity and used bytes, and whether its
heartbeats arrive. The original could also replace a table (-put); here the
table is read-only: datanodes enter it by registering.`, true)
	put := f.Bool("put", false, "replace the table (refused: read-only)")
	out := newPrinter(f, "one JSON object per row: id, identity, addr, state, capacity, used (bytes), alive")
	return withClient(ctx, f, args, 0, 1, func(c *client.Client) error {
		if len(f.pos) == 1 && f.pos[0] != "datanodes" {
			return usagef("unknown table %q (the only table is \"datanodes\")", f.pos[0])
		}
		if *put {
			return fmt.Errorf("admin_table datanodes: the table is read-only for now (datanodes enter it by registering; 'plasma datanode init' makes a volume)")
		}
		nodes, err := c.Datanodes(ctx)
		if err != nil {
			return err
		}
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
		var tw *tabwriter.Writer
		if !out.JSON() {
			tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tIDENTITY\tADDRESS\tSTATE\tCAPACITY\tUSED\tALIVE")
		}
		for _, n := range nodes {
			row := jsonTableRow{ID: n.ID, Identity: n.Identity, Addr: n.Addr, State: nodeState(n),
				Capacity: n.Blocks * uint64(n.Blocksize), Used: n.Used * uint64(n.Blocksize), Alive: n.Alive}
			if tw == nil {
				if err := out.item(row, nil); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%s\n", row.ID, escapeName(row.Identity), escapeName(row.Addr), row.State,
				row.Capacity, row.Used, map[bool]string{true: "yes", false: "no"}[row.Alive])
		}
		if tw != nil {
			return tw.Flush()
		}
		return nil
	})
}

// nodeState is the original's datanode state: disabled, else alive or dead.
func nodeState(n client.Datanode) string {
	switch {
	case !n.Enabled:
		return "disabled"
	case n.Alive:
		return "alive"
	}
	return "dead"
}

// topologyFlags adds the original put's -chain and -star to f; the
// function returned gives the topology chosen (the last one named wins,
// chain when neither is).
func topologyFlags(f *flags) func() client.Topology {
	t := client.Chain
	f.BoolFunc("chain", "send each block to the first replica, which forwards it to the next (the default)", func(string) error { t = client.Chain; return nil })
	f.BoolFunc("star", "send each block to every replica directly (no datanode forwards; the client's upload is spent once per replica)", func(string) error { t = client.Star; return nil })
	return func() client.Topology { return t }
}

// treeArg is a path argument split by its tree prefix (client.SplitTree).
type treeArg struct {
	local bool
	path  string
}

func splitTreeArgs(args []string) ([]treeArg, error) {
	out := make([]treeArg, len(args))
	for i, a := range args {
		local, p, err := client.SplitTree(a)
		if err != nil {
			return nil, usageError{err.Error()}
		}
		out[i] = treeArg{local, p}
	}
	return out, nil
}

// copyAcross copies between the local tree and PlasmaFS (or within the
// local tree): a PlasmaFS destination is created as by put (replication
// rep, 0 for the cluster default), a local one is written whole under a
// temporary name and renamed, as by get.
func copyAcross(ctx context.Context, c *client.Client, from, to treeArg, rep int, quiet bool) error {
	if !from.local {
		tx := c.Begin()
		defer tx.Abort(ctx)
		src, err := tx.Open(ctx, from.path)
		if err != nil {
			return err
		}
		bar := newProgress(src.Size(), "cp", quiet)
		defer bar.finish()
		return getToFile(ctx, src, localInto(to.path, path.Base(from.path)), bar)
	}
	lf, err := os.Open(from.path)
	if err != nil {
		return err
	}
	defer lf.Close()
	st, err := lf.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s: is a directory", from.path)
	}
	bar := newProgress(st.Size(), "cp", quiet)
	defer bar.finish()
	name := filepath.Base(from.path)
	if to.local {
		return copyLocal(ctx, io.TeeReader(lf, bar), localInto(to.path, name))
	}
	// Into an existing directory, as cp within PlasmaFS and put do.
	dst, err := intoDir(ctx, c, to.path, name, false)
	if err != nil {
		return err
	}
	_, err = c.CopyIn(ctx, io.TeeReader(lf, bar), dst, client.CopyOptions{Rep: rep, CommitEvery: 1 << 30})
	return err
}

// localInto is where a copy named name goes given the local destination
// dst: into dst if it is a directory, as cp(1) does.
func localInto(dst, name string) string {
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		return filepath.Join(dst, name)
	}
	return dst
}

// copyLocal writes r to the local file dst, whole or not at all.
func copyLocal(ctx context.Context, r io.Reader, dst string) error {
	if special, err := openSpecial(dst); err != nil || special != nil {
		if err != nil {
			return err
		}
		return writeSpecial(ctx, special, dst, func(w io.Writer) error {
			_, err := io.Copy(w, r)
			return err
		})
	}
	tmp, err := createTemp(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", dst, err)
	}
	return nil
}
