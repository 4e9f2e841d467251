package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/client"
)

// ReReplicateOptions configure the re-replication benchmark.
type ReReplicateOptions struct {
	Plasma string // the plasma binary that runs the cluster
	Dir    string // local directory for the cluster and the cp reference (one disk; removed after)
	// Size is about what the killed datanode holds: the files written
	// (replication 2 over 3 datanodes) total 1.5 times it.
	Size int64
	// Window is how long the reader's throughput is measured before the
	// datanode is killed (reads without re-replication).
	Window time.Duration
	// CopiesPerNode is the namenode's -copies-per-node (0: its default).
	CopiesPerNode int
	// CopyRate is the datanodes' -copy-rate (0: their default).
	CopyRate int64
	// ShortCircuit lets the reader read the datanodes' block files
	// directly (a reader on their machine); without it, it reads through
	// the data protocol, as a reader on another machine does.
	ShortCircuit bool
}

// reFileSize is the size of each file the benchmark writes.
const reFileSize = 64 << 20

// ReReplicate measures how fast the namenode puts back the replicas of a
// datanode that died: a cluster of its own (a namenode with -dead-after
// 1s and three datanodes, on o.Dir's disk) gets files of replication 2,
// one datanode is killed, and the time from the namenode declaring it
// dead to every block being back at two replicas is taken for the bytes
// it held. Its reference is cp of as many bytes between two directories
// of the same disk, with the copy fsynced as the datanodes sync theirs.
// A reader reads the files all along: its throughput while the copies run
// is compared with its throughput just before the datanode was killed.
func ReReplicate(ctx context.Context, o ReReplicateOptions) (*Report, error) {
	rep := &Report{Bench: "rereplicate", Started: time.Now(),
		Params: fmt.Sprintf("size=%s window=%v copies-per-node=%d copy-rate=%d blocksize=%s short-circuit=%v", gib(o.Size), o.Window, o.CopiesPerNode, o.CopyRate, benchBlocksize, o.ShortCircuit)}
	dir, err := os.MkdirTemp(o.Dir, "plasma-bench-rerep-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cl, err := startRereplCluster(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	defer cl.stop()
	c, err := client.New(ctx, cl.cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()

	// The files: 1.5 × Size in files of reFileSize, replication 2.
	var files []string
	buf := make([]byte, reFileSize)
	rng := rand.NewChaCha8([32]byte{23})
	for written := int64(0); written < o.Size*3/2; written += reFileSize {
		rng.Read(buf)
		p := fmt.Sprintf("/f%04d", len(files))
		if _, err := c.CopyIn(ctx, bytes.NewReader(buf), p, client.CopyOptions{Rep: 2}); err != nil {
			return nil, fmt.Errorf("write %s: %w", p, err)
		}
		files = append(files, p)
	}
	st, err := c.ReplicationStatus(ctx)
	if err != nil {
		return nil, err
	}
	victim := st.Nodes[0]
	held := int64(victim.Replicas) * int64(victim.Blocksize)

	// The reader, from now until the end.
	var readBytes atomic.Int64
	rctx, stopReader := context.WithCancel(ctx)
	var readErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rcfg := cl.cfg
		rcfg.NoShortCircuit = !o.ShortCircuit
		readErr = readLoop(rctx, rcfg, files, &readBytes)
	}()
	defer func() { stopReader(); wg.Wait() }()
	sample := func() (int64, time.Time) { return readBytes.Load(), time.Now() }
	time.Sleep(time.Second) // the reader's first reads (connections, read-ahead) are not measured
	b0, t0 := sample()
	time.Sleep(o.Window)
	b1, t1 := sample()
	without := float64(b1-b0) / 1e6 / t1.Sub(t0).Seconds()

	if err := cl.kill(victim.Addr); err != nil {
		return nil, err
	}
	killed := time.Now()
	var bDead, bDone int64
	var tDead, tDone time.Time
	for {
		st, err := c.ReplicationStatus(ctx)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		state := ""
		for _, n := range st.Nodes {
			if n.ID == victim.ID {
				state = n.State
			}
		}
		switch {
		case tDead.IsZero() && state == "dead":
			bDead, tDead = sample()
		case !tDead.IsZero() && st.Queued == 0 && st.InFlight == 0 && st.Under == 0 && st.Lost == 0:
			bDone, tDone = sample()
		}
		if !tDone.IsZero() {
			break
		}
		if now.Sub(killed) > 30*time.Minute {
			return nil, fmt.Errorf("re-replication not done 30 minutes after the datanode was killed: %+v", st)
		}
		if rerr := rctx.Err(); rerr != nil || readErr != nil {
			return nil, fmt.Errorf("reader: %v", errors.Join(readErr, rerr))
		}
		time.Sleep(50 * time.Millisecond) // polling the namenode's status
	}
	took := tDone.Sub(tDead)
	during := float64(bDone-bDead) / 1e6 / took.Seconds()
	stopReader()
	wg.Wait()
	if readErr != nil {
		return nil, fmt.Errorf("reader: %w", readErr)
	}

	cpTook, err := cpReference(dir, held)
	if err != nil {
		return nil, err
	}
	ours := float64(held) / 1e6 / took.Seconds()
	ref := float64(held) / 1e6 / cpTook.Seconds()
	rep.add(Result{Name: fmt.Sprintf("re-replication of a killed datanode's %s (from declared dead to all blocks at 2 replicas)", gib(held)), Unit: "MB/s",
		Ours: ours, RefName: "cp + fsync of as many bytes between two directories on the same disk", Ref: ref,
		Note: fmt.Sprintf("%.2f GiB/min in %v (cp %v); goal ratio ≥ 0.5", float64(held)/(1<<30)/took.Minutes(), took.Round(time.Millisecond), cpTook.Round(time.Millisecond))})
	how := "through the data protocol"
	if o.ShortCircuit {
		how = "short-circuit"
	}
	rep.add(Result{Name: fmt.Sprintf("user reads during re-replication (one reader, %s, whole files, round robin)", how), Unit: "MB/s",
		Ours: during, RefName: fmt.Sprintf("the same reader in the %v before the datanode was killed", o.Window), Ref: without,
		Note: "same run, same files; goal ratio ≥ 0.7"})
	return rep, nil
}

// readLoop reads files whole, one after another, until ctx ends, adding
// what it reads to n.
func readLoop(ctx context.Context, cfg client.Config, files []string, n *atomic.Int64) error {
	c, err := client.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	for i := 0; ; i++ {
		p := files[i%len(files)]
		err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, p)
			if err != nil {
				return err
			}
			_, err = io.Copy(countingDiscard{n}, f)
			return err
		})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
	}
}

type countingDiscard struct{ n *atomic.Int64 }

func (w countingDiscard) Write(b []byte) (int, error) {
	w.n.Add(int64(len(b)))
	return len(b), nil
}

// cpReference writes a file of size bytes in dir, then times cp of it to
// another directory of dir followed by an fsync of the copy.
func cpReference(dir string, size int64) (time.Duration, error) {
	src, dst := filepath.Join(dir, "cp-src"), filepath.Join(dir, "cp-dst")
	for _, d := range []string{src, dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	f, err := os.Create(filepath.Join(src, "data"))
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 8<<20)
	rng := rand.NewChaCha8([32]byte{42})
	for left := size; left > 0; left -= int64(len(buf)) {
		rng.Read(buf)
		if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
			f.Close()
			return 0, err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, err
	}
	f.Close()
	start := time.Now()
	if out, err := exec.Command("cp", filepath.Join(src, "data"), filepath.Join(dst, "data")).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("cp: %v: %s", err, out)
	}
	g, err := os.Open(filepath.Join(dst, "data"))
	if err != nil {
		return 0, err
	}
	defer g.Close()
	if err := g.Sync(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// rereplCluster is the benchmark's cluster: a namenode and three
// datanodes, processes of o.Plasma.
type rereplCluster struct {
	cfg  client.Config
	nn   *exec.Cmd
	dns  map[string]*exec.Cmd // by address
	logf *os.File
}

func startRereplCluster(ctx context.Context, o ReReplicateOptions, dir string) (*rereplCluster, error) {
	logf, err := os.Create(filepath.Join(dir, "cluster.log"))
	if err != nil {
		return nil, err
	}
	cl := &rereplCluster{dns: map[string]*exec.Cmd{}, logf: logf}
	addr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	cl.cfg = client.Config{Namenodes: []string{addr}, Security: "none", DataSecurity: "none", User: "root"}
	args := []string{"namenode", "-listen", addr, "-db", filepath.Join(dir, "namenode.db"), "-format", "-security", "none", "-log-level", "warn",
		"-cluster", benchCluster, "-blocksize", benchBlocksize, "-dead-after", "1s"}
	if o.CopiesPerNode > 0 {
		args = append(args, "-copies-per-node", strconv.Itoa(o.CopiesPerNode))
	}
	cl.nn = exec.Command(o.Plasma, args...)
	cl.nn.Stdout, cl.nn.Stderr = logf, logf
	if err := cl.nn.Start(); err != nil {
		return nil, fmt.Errorf("start the namenode (-plasma %s): %w", o.Plasma, err)
	}
	volSize := strconv.FormatInt(o.Size*2+256<<20, 10)
	for i := range 3 {
		vol := filepath.Join(dir, fmt.Sprintf("vol%d", i))
		if out, err := exec.Command(o.Plasma, "datanode", "init", "-fallocate", "-dir", vol, "-cluster", benchCluster, "-blocksize", benchBlocksize, "-size", volSize).CombinedOutput(); err != nil {
			cl.stop()
			return nil, fmt.Errorf("datanode init: %v: %s", err, out)
		}
		dnAddr, err := freeLoopback()
		if err != nil {
			cl.stop()
			return nil, err
		}
		dn := exec.Command(o.Plasma, "datanode", "-dir", vol, "-listen", dnAddr, "-namenode", addr, "-security", "none", "-namenode-security", "none",
			"-log-level", "warn", "-heartbeat", "200ms")
		if o.CopyRate > 0 {
			dn.Args = append(dn.Args, "-copy-rate", strconv.FormatInt(o.CopyRate, 10))
		}
		dn.Stdout, dn.Stderr = logf, logf
		if err := dn.Start(); err != nil {
			cl.stop()
			return nil, fmt.Errorf("start a datanode: %w", err)
		}
		cl.dns[dnAddr] = dn
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		c, err := client.New(ctx, cl.cfg)
		if err == nil {
			st, err := c.FsStat(ctx)
			c.Close()
			if err == nil && st.LiveDatanodes == 3 {
				return cl, nil
			}
		}
		if time.Now().After(deadline) {
			cl.stop()
			log, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("the cluster started with %s is not up with 3 live datanodes after 60 s (%v):\n%s", o.Plasma, err, log)
		}
		time.Sleep(20 * time.Millisecond) // waiting for processes to listen
	}
}

// kill kills the datanode at addr (SIGKILL).
func (cl *rereplCluster) kill(addr string) error {
	dn := cl.dns[addr]
	if dn == nil {
		return fmt.Errorf("no datanode of this benchmark at %s", addr)
	}
	dn.Process.Kill()
	dn.Wait()
	delete(cl.dns, addr)
	return nil
}

func (cl *rereplCluster) stop() {
	for _, c := range cl.dns {
		c.Process.Kill()
		c.Wait()
	}
	if cl.nn != nil && cl.nn.Process != nil {
		cl.nn.Process.Kill()
		cl.nn.Wait()
	}
	cl.logf.Close()
}

// gib formats a byte count in GiB.
func gib(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }
