package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// MetricsCostOptions configure the cost of metrics on create+commit.
type MetricsCostOptions struct {
	Plasma  string // the plasma binary that runs the two namenodes
	Dir     string // local directory for their databases (removed after)
	N       int    // files per client per round
	Clients []int
	Mode    string // durable or async
	Rounds  int    // rounds per side (medians reported)
}

// MetricsCost measures create+commit (empty files: the namenode alone) on
// namenodes started alike, one with an admin port whose /metrics is
// scraped every second while it is measured (metrics on), two without
// (metrics off: they observe nothing). Rounds rotate among them, so other
// work on the machine weighs on each alike; the ratio is on / off, and
// that of the two namenodes without metrics shows what the machine's
// noise alone makes of two identical sides.
func MetricsCost(ctx context.Context, o MetricsCostOptions) (*Report, error) {
	rep := &Report{Bench: "create-metrics", Started: time.Now(), Params: fmt.Sprintf("n=%d clients=%v mode=%s rounds=%d", o.N, o.Clients, o.Mode, o.Rounds)}
	dir, err := os.MkdirTemp(o.Dir, "plasma-bench-metrics-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// Started in this order, so the side with metrics is not the first
	// or the last one started.
	var off, on, off2 *benchNamenode
	for _, s := range []struct {
		nn      **benchNamenode
		name    string
		metrics bool
	}{{&off, "off", false}, {&on, "on", true}, {&off2, "off2", false}} {
		nn, err := startBenchNamenode(ctx, o.Plasma, filepath.Join(dir, s.name), s.metrics)
		if err != nil {
			return nil, err
		}
		defer nn.stop()
		*s.nn = nn
	}
	d := clientx.Durable
	if o.Mode == "async" {
		d = clientx.Async
	}
	var seq atomic.Int64
	measure := func(nn *benchNamenode, p int) (float64, error) {
		if nn.admin != "" {
			stop := scrapeEverySecond("http://" + nn.admin + "/metrics")
			defer stop()
		}
		dir := fmt.Sprintf("/r%d", seq.Add(1))
		setup, err := client.New(ctx, nn.cfg)
		if err != nil {
			return 0, err
		}
		defer setup.Close()
		if err := setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { _, err := tx.Mkdir(ctx, dir, 0); return err }); err != nil {
			return 0, err
		}
		var files atomic.Int64
		return parallel(ctx, nn.cfg, p, o.N, func(ctx context.Context, c *client.Client, _ *client.Txn) error {
			_, err := clientx.Auto(c, d).Create(ctx, fmt.Sprintf("%s/f%d", dir, files.Add(1)), client.CreateOptions{})
			return err
		})
	}
	for _, p := range o.Clients {
		rates := map[*benchNamenode][]float64{}
		for round := 0; round < o.Rounds; round++ {
			// Rotate which side goes first, so none always runs on the
			// warmer (or more loaded) part of a round.
			sides := []*benchNamenode{on, off, off2}
			for i := range sides {
				nn := sides[(i+round)%len(sides)]
				r, err := measure(nn, p)
				if err != nil {
					return nil, fmt.Errorf("create+commit on the namenode with metrics %s: %w", nn.name, err)
				}
				rates[nn] = append(rates[nn], r)
			}
		}
		rep.add(Result{Name: fmt.Sprintf("create+commit %s, %d clients, metrics on (admin port scraped every 1 s)", o.Mode, p), Unit: "commits/s",
			Ours: median(rates[on]), RefName: "the same on a namenode without metrics (no admin port)", Ref: median(rates[off]),
			Note: fmt.Sprintf("medians of %d rotating rounds (on %s, off %s); goal ratio ≥ 0.97", o.Rounds, spread(rates[on]), spread(rates[off]))})
		rep.add(Result{Name: fmt.Sprintf("noise: create+commit %s, %d clients, another namenode without metrics", o.Mode, p), Unit: "commits/s",
			Ours: median(rates[off2]), RefName: "the namenode without metrics above", Ref: median(rates[off]),
			Note: fmt.Sprintf("two identical sides: how far from 1.00 the machine's load alone puts a ratio (off2 %s)", spread(rates[off2]))})
	}
	return rep, nil
}

// benchNamenode is a namenode process a benchmark started.
type benchNamenode struct {
	name  string // "on" or "off"
	cmd   *exec.Cmd
	cfg   client.Config
	admin string // admin address ("": none)
	dn    *exec.Cmd
}

// The benchmark's namenodes and datanodes.
const (
	benchCluster   = "bench"
	benchBlocksize = "1048576"
)

// startBenchNamenode starts a namenode at security level none with a new
// database in dir, with an admin port if metrics, and waits until it
// answers.
func startBenchNamenode(ctx context.Context, plasma, dir string, metrics bool) (*benchNamenode, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	nn := &benchNamenode{name: "off", cfg: client.Config{Namenodes: []string{addr}, Security: "none", DataSecurity: "none"}}
	args := []string{"namenode", "-listen", addr, "-db", filepath.Join(dir, "namenode.db"), "-format", "-security", "none", "-log-level", "warn",
		"-cluster", benchCluster, "-blocksize", benchBlocksize}
	if metrics {
		if nn.admin, err = freeLoopback(); err != nil {
			return nil, err
		}
		nn.name = "on"
		args = append(args, "-admin-listen", nn.admin)
	}
	logf, err := os.Create(filepath.Join(dir, "namenode.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	nn.cmd = exec.Command(plasma, args...)
	nn.cmd.Stdout, nn.cmd.Stderr = logf, logf
	if err := nn.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the namenode (-plasma %s): %w", plasma, err)
	}
	dn, err := startBenchDatanode(ctx, plasma, dir, []string{addr}, nn.cfg, logf, 30*time.Second)
	nn.dn = dn
	if err != nil {
		nn.stop()
		return nil, fmt.Errorf("the namenode started with %s at %s: %w", plasma, addr, err)
	}
	return nn, nil
}

func (nn *benchNamenode) stop() {
	for _, c := range []*exec.Cmd{nn.dn, nn.cmd} {
		if c != nil && c.Process != nil {
			c.Process.Kill()
			c.Wait()
		}
	}
}

func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// scrapeEverySecond reads url every second (as Prometheus would) until
// the returned function is called.
func scrapeEverySecond(url string) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if resp, err := http.Get(url); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-ended }
}

// spread is the lowest and highest of xs, for judging a median's noise.
func spread(xs []float64) string {
	return fmt.Sprintf("%.0f–%.0f", slices.Min(xs), slices.Max(xs))
}
