package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/loopback"
	"github.com/plasmafs/plasma/internal/meta"
)

// GroupOptions configure the replicated-namenode benchmark.
type GroupOptions struct {
	Plasma    string // the plasma binary that runs the namenodes
	Dir       string // local directory for their databases (removed after)
	N         int    // files per client per round
	Clients   []int
	Mode      string // durable or async
	Rounds    int    // rounds per side (medians reported)
	Failovers int    // leader kills for the failover time (0: none)
}

// Group measures create+commit on a 3-member namenode group beside a
// single namenode started alike (level none, one datanode each), in
// rounds that alternate between the two, and the failover time: from a
// kill -9 of the leader to the first acknowledged durable commit of a
// client given the members' list.
func Group(ctx context.Context, o GroupOptions) (*Report, error) {
	rep := &Report{Bench: "create-group", Started: time.Now(), Params: fmt.Sprintf("n=%d clients=%v mode=%s rounds=%d failovers=%d", o.N, o.Clients, o.Mode, o.Rounds, o.Failovers)}
	dir, err := os.MkdirTemp(o.Dir, "plasma-bench-group-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	single, err := startBenchNamenode(ctx, o.Plasma, filepath.Join(dir, "single"), false)
	if err != nil {
		return nil, err
	}
	defer single.stop()
	g, err := startBenchGroup(ctx, o.Plasma, filepath.Join(dir, "group"), 3)
	if err != nil {
		return nil, err
	}
	defer g.stop()
	d := clientx.Durable
	if o.Mode == "async" {
		d = clientx.Async
	}
	var seq atomic.Int64
	measure := func(cfg client.Config, p int) (float64, error) {
		dir := fmt.Sprintf("/r%d", seq.Add(1))
		setup, err := client.New(ctx, cfg)
		if err != nil {
			return 0, err
		}
		defer setup.Close()
		if err := setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { _, err := tx.Mkdir(ctx, dir, 0); return err }); err != nil {
			return 0, err
		}
		var files atomic.Int64
		return parallel(ctx, cfg, p, o.N, func(ctx context.Context, c *client.Client, _ *client.Txn) error {
			_, err := clientx.Auto(c, d).Create(ctx, fmt.Sprintf("%s/f%d", dir, files.Add(1)), client.CreateOptions{})
			return err
		})
	}
	for _, p := range o.Clients {
		var ones, groups []float64
		for round := 0; round < o.Rounds; round++ {
			sides := []client.Config{single.cfg, g.cfg}
			if round%2 == 1 {
				sides[0], sides[1] = sides[1], sides[0]
			}
			for _, cfg := range sides {
				r, err := measure(cfg, p)
				if err != nil {
					return nil, fmt.Errorf("create+commit on %s: %w", strings.Join(cfg.Namenodes, ","), err)
				}
				if len(cfg.Namenodes) > 1 {
					groups = append(groups, r)
				} else {
					ones = append(ones, r)
				}
			}
		}
		rep.add(Result{Name: fmt.Sprintf("create+commit %s, %d clients, 3-namenode group", o.Mode, p), Unit: "commits/s",
			Ours: median(groups), RefName: "the same on a single namenode", Ref: median(ones),
			Note: fmt.Sprintf("medians of %d alternating rounds (group %s, single %s); goal ratio ≥ %s", o.Rounds, spread(groups), spread(ones), map[bool]string{true: "0.8", false: "0.7"}[o.Mode == "async"])})
	}
	if o.Failovers > 0 {
		times, err := g.failovers(ctx, o.Failovers)
		if err != nil {
			return nil, err
		}
		ms := make([]float64, len(times))
		for i, t := range times {
			ms[i] = float64(t.Milliseconds())
		}
		rep.add(Result{Name: fmt.Sprintf("failover: kill -9 of the leader to the first acknowledged commit, median of %d", len(ms)), Unit: "ms",
			Ours: median(ms), Note: fmt.Sprintf("worst %.0f ms, best %.0f ms (election timeout 2 s)", slices.Max(ms), slices.Min(ms))})
	}
	return rep, nil
}

// benchGroup is a namenode group a benchmark started, with one datanode.
type benchGroup struct {
	plasma  string
	dir     string
	addrs   []string
	members []*exec.Cmd
	dn      *exec.Cmd
	cfg     client.Config
	logf    *os.File
}

func (g *benchGroup) peers() string {
	var ps []string
	for i, a := range g.addrs {
		ps = append(ps, fmt.Sprintf("%d=%s", i+1, a))
	}
	return strings.Join(ps, ",")
}

func (g *benchGroup) db(i int) string { return filepath.Join(g.dir, fmt.Sprintf("nn%d.db", i+1)) }

func (g *benchGroup) startMember(i int) error {
	cmd := exec.Command(g.plasma, "namenode", "-db", g.db(i), "-security", "none", "-log-level", "warn", "-cluster", benchCluster,
		"-blocksize", benchBlocksize, "-peers", g.peers(), "-id", fmt.Sprint(i+1))
	cmd.Stdout, cmd.Stderr = g.logf, g.logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start namenode %d: %w", i+1, err)
	}
	g.members[i] = cmd
	return nil
}

// startBenchGroup formats one database, copies it to each of n members
// and starts them and a datanode.
func startBenchGroup(ctx context.Context, plasma, dir string, n int) (*benchGroup, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "group.log"))
	if err != nil {
		return nil, err
	}
	g := &benchGroup{plasma: plasma, dir: dir, members: make([]*exec.Cmd, n), logf: logf}
	s, err := meta.OpenSQLiteWith(g.db(0), meta.SQLiteOptions{Format: true})
	if err != nil {
		return nil, err
	}
	s.Close()
	for i := 0; i < n; i++ {
		a, err := loopback.FreePair()
		if err != nil {
			return nil, err
		}
		g.addrs = append(g.addrs, a)
		if i > 0 {
			if out, err := exec.Command(plasma, "namenode", "backup", "-db", g.db(0), "-o", g.db(i)).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("copy the database: %v: %s", err, out)
			}
		}
	}
	g.cfg = client.Config{Namenodes: g.addrs, Security: "none", DataSecurity: "none"}
	for i := range n {
		if err := g.startMember(i); err != nil {
			g.stop()
			return nil, err
		}
	}
	dn, err := startBenchDatanode(ctx, plasma, dir, g.addrs, g.cfg, logf, 60*time.Second)
	g.dn = dn
	if err != nil {
		g.stop()
		return nil, fmt.Errorf("the namenode group does not serve: %w", err)
	}
	return g, nil
}

// failovers kills the leader n times, each time measuring until a client
// with the list has a durable commit acknowledged, then restarts the
// killed member and waits until the group is whole and caught up.
func (g *benchGroup) failovers(ctx context.Context, n int) ([]time.Duration, error) {
	cl, err := client.New(ctx, g.cfg)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []time.Duration
	for k := 0; k < n; k++ {
		leader := -1
		for i, m := range client.NamenodeGroup(ctx, g.cfg) {
			if m.Err == nil && m.Role == "leader" {
				leader = i
			}
		}
		if leader < 0 {
			return nil, fmt.Errorf("failover %d: no leader", k+1)
		}
		g.members[leader].Process.Kill()
		start := time.Now()
		g.members[leader].Wait()
		for i := 0; ; i++ {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := clientx.Auto(cl, clientx.Durable).Mkdir(cctx, fmt.Sprintf("/failover-%d-%d", k, i), 0)
			cancel()
			if err == nil {
				break
			}
			if time.Since(start) > time.Minute {
				return nil, fmt.Errorf("failover %d: no commit acknowledged a minute after the leader's kill: %w", k+1, err)
			}
		}
		out = append(out, time.Since(start))
		if err := g.startMember(leader); err != nil {
			return nil, err
		}
		if err := g.waitWhole(ctx); err != nil {
			return nil, fmt.Errorf("failover %d: %w", k+1, err)
		}
	}
	return out, nil
}

// waitWhole waits until every member answers and none lags the leader.
func (g *benchGroup) waitWhole(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ms := client.NamenodeGroup(ctx, g.cfg)
		var commit uint64
		ok := true
		for _, m := range ms {
			if m.Err != nil {
				ok = false
			} else if m.Role == "leader" {
				commit = m.Commit
			}
		}
		for _, m := range ms {
			ok = ok && commit > 0 && m.Applied >= commit
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the group is not whole and caught up 60 s after a member restarted: %+v", ms)
		}
		time.Sleep(20 * time.Millisecond) // waiting for a process to catch up
	}
}

func (g *benchGroup) stop() {
	for _, c := range append([]*exec.Cmd{g.dn}, g.members...) {
		if c != nil && c.Process != nil {
			c.Process.Kill()
			c.Wait()
		}
	}
	g.logf.Close()
}
