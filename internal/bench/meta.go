package bench

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	_ "modernc.org/sqlite" // the raw SQLite reference
)

func isNotFound(err error) bool { return errors.Is(err, client.ErrNotFound) }

// EchoServer serves the ping-pong reference: it echoes 64-byte messages
// on ln until the listener closes. Run it in its own process (plasma
// bench echo-server) so the reference crosses a process boundary like our
// RPC does.
func EchoServer(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			c.(*net.TCPConn).SetNoDelay(true)
			buf := make([]byte, 64)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
}

// PingPong measures n raw TCP round trips of 64 bytes, one synchronous
// client, against the echo server at addr.
func PingPong(addr string, n int) (float64, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.(*net.TCPConn).SetNoDelay(true)
	buf := make([]byte, 64)
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := c.Write(buf); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// startEcho runs "plasma-bench echo-server" as a child process and returns
// its address and a stop function.
func startEcho() (string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := osexec.Command(self, "echo-server")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("echo server: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}

// LookupOptions configure the lookup benchmark (seed 000 test 4).
type LookupOptions struct {
	N       int // lookups per client
	Clients []int
	Ino     uint64 // inode to stat (0: the root)
}

// Lookup measures synchronous inode lookups (stat by number), one
// transaction per client, each client on its own connection, beside a raw
// TCP ping-pong and an empty call of our RPC.
func Lookup(ctx context.Context, cfg client.Config, o LookupOptions) (*Report, error) {
	rep := &Report{Bench: "lookup", Started: time.Now(), Params: fmt.Sprintf("n=%d clients=%v ino=%d", o.N, o.Clients, o.Ino)}
	ino := o.Ino
	if ino == 0 {
		ino = 1
	}
	echo, stop, err := startEcho()
	if err != nil {
		return nil, err
	}
	defer stop()
	// Reference and ours alternate, three rounds, medians: cross-process
	// round trips on a VM vary a lot from second to second.
	var pps []float64
	measurePP := func() error {
		r, err := PingPong(echo, o.N)
		pps = append(pps, r)
		return err
	}
	one := 0.0
	for _, p := range o.Clients {
		var rates []float64
		for round := 0; round < 3; round++ {
			if err := measurePP(); err != nil {
				return nil, err
			}
			rate, err := parallel(ctx, cfg, p, o.N, func(ctx context.Context, c *client.Client, tx *client.Txn) error {
				_, err := tx.StatInode(ctx, ino)
				return err
			})
			if err != nil {
				return nil, err
			}
			rates = append(rates, rate)
		}
		rate := median(rates)
		pp := median(pps)
		if p == 1 {
			one = rate
		}
		res := Result{Name: fmt.Sprintf("stat, %d clients", p), Unit: "req/s", Ours: rate, RefName: "raw TCP 64-byte ping-pong, 1 client, other process", Ref: pp, Seed: "≈2000 lookups/s (1 client)"}
		if p > 1 && one > 0 {
			res.Note = fmt.Sprintf("%.2f× one client", rate/one)
		}
		rep.add(res)
	}
	var pings []float64
	for round := 0; round < 3; round++ {
		if err := measurePP(); err != nil {
			return nil, err
		}
		ping, err := parallel(ctx, cfg, 1, o.N, func(ctx context.Context, c *client.Client, _ *client.Txn) error { return c.Ping(ctx) })
		if err != nil {
			return nil, err
		}
		pings = append(pings, ping)
	}
	rep.add(Result{Name: "empty RPC, 1 client", Unit: "req/s", Ours: median(pings), RefName: "raw TCP 64-byte ping-pong (other process)", Ref: median(pps)})
	return rep, nil
}

// parallel runs fn n times in each of p clients (one connection and one
// transaction each, which fn may ignore; an unused transaction costs
// nothing) and returns the total rate.
func parallel(ctx context.Context, cfg client.Config, p, n int, fn func(ctx context.Context, c *client.Client, tx *client.Txn) error) (float64, error) {
	clients := make([]*client.Client, p)
	txns := make([]*client.Txn, p)
	for i := range clients {
		c, err := client.New(ctx, cfg)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		clients[i] = c
		txns[i] = c.Begin()
		defer txns[i].Abort(ctx)
	}
	return rate(p, n, func(w int) error { return fn(ctx, clients[w], txns[w]) })
}

// rate runs p workers that each call op n times and returns the total
// operations per second; the first error stops its worker and is returned.
func rate(p, n int, op func(worker int) error) (float64, error) {
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for w := 0; w < p; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				if err := op(w); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if err, ok := firstErr.Load().(error); ok {
		return 0, err
	}
	return float64(p*n) / el.Seconds(), nil
}

// CreateOptions configure the create benchmark (seed 000 test 5, seed 001).
type CreateOptions struct {
	N       int // files per client
	Clients []int
	Dir     string // PlasmaFS directory (created)
	DBDir   string // local directory for the raw SQLite reference
	// Mode is "durable" (each commit acknowledged when durable), "async"
	// (acknowledged once applied) or "relaxed" (the namenode runs with
	// -relaxed: every commit async).
	Mode string
}

// Create measures files created per second, each in its own committed
// transaction, beside a raw SQLite loop of create-shaped commits (same
// durability setting, same concurrency), then the floors of one client:
// a TCP round trip and (durable) one O_DSYNC 4 KiB write.
func Create(ctx context.Context, cfg client.Config, o CreateOptions) (*Report, error) {
	rep := &Report{Bench: "create", Started: time.Now(), Params: fmt.Sprintf("n=%d clients=%v mode=%s", o.N, o.Clients, o.Mode)}
	setup, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	base := fmt.Sprintf("%s/run-%d", o.Dir, time.Now().UnixNano())
	if err := setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.MkdirAll(ctx, base, 0)
		return err
	}); err != nil {
		return nil, err
	}
	for _, p := range o.Clients {
		dir := fmt.Sprintf("%s/p%d", base, p)
		setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { _, err := tx.Mkdir(ctx, dir, 0); return err })
		var seq atomic.Int64
		nn0, _ := clientx.NamenodeStats(ctx, setup)
		self0 := selfCPU()
		d := clientx.Durable
		if o.Mode == "async" {
			d = clientx.Async
		}
		rate, err := parallel(ctx, cfg, p, o.N, func(ctx context.Context, c *client.Client, _ *client.Txn) error {
			// One compound request: create and commit in one round trip.
			_, err := clientx.Auto(c, d).Create(ctx, fmt.Sprintf("%s/f%d", dir, seq.Add(1)), client.CreateOptions{})
			return err
		})
		if err != nil {
			return nil, err
		}
		nn1, _ := clientx.NamenodeStats(ctx, setup)
		ops := float64(p * o.N)
		nnCPU := float64((nn1.CPU - nn0.CPU).Microseconds()) / ops
		clCPU := float64((selfCPU() - self0).Microseconds()) / ops
		cpuNote := fmt.Sprintf("CPU %.0f µs/op (namenode %.0f, clients %.0f)", nnCPU+clCPU, nnCPU, clCPU)
		if syncs := nn1.Syncs - nn0.Syncs; syncs > 0 {
			cpuNote += fmt.Sprintf("; %.2f commits per fsync", float64(nn1.Commits-nn0.Commits)/float64(syncs))
		}
		ref, err := sqliteCommits(o.DBDir, p, o.N, o.Mode != "durable")
		if err != nil {
			return nil, err
		}
		seed := ""
		if p == 1 {
			seed = "119 commits/s"
		} else if p == 8 {
			seed = "362 commits/s sustained (550 peak)"
		}
		rep.add(Result{Name: fmt.Sprintf("create+commit %s, %d clients", o.Mode, p), Unit: "commits/s", Ours: rate,
			RefName: fmt.Sprintf("raw SQLite create-shaped commits (3 rows), %d writers", p), Ref: ref, Seed: seed, Note: cpuNote})
	}
	// The floors a single synchronous client cannot go below: one round
	// trip to another process, and (durable) one durable 4 KiB write on
	// the disk the namenode's log is on.
	echo, stop, err := startEcho()
	if err != nil {
		return nil, err
	}
	defer stop()
	pp, err := PingPong(echo, o.N)
	if err != nil {
		return nil, err
	}
	one := rep.Results[0].Ours
	rep.add(Result{Name: "floor: TCP 64-byte ping-pong, 1 client", Unit: "req/s", Ours: one, RefName: "create+commit " + o.Mode + ", 1 client, beside the floor", Ref: pp})
	if o.Mode == "durable" {
		ds, err := dsyncAppends(o.DBDir, o.N)
		if err != nil {
			return nil, err
		}
		rep.add(Result{Name: "floor: 4 KiB O_DSYNC appends, 1 writer", Unit: "writes/s", Ours: one, RefName: "create+commit durable, 1 client, beside the floor", Ref: ds})
	}
	return rep, nil
}

// dsyncAppends measures n 4 KiB writes to a preallocated (written) file
// opened O_DSYNC, one after another: the cost of one durable log record.
func dsyncAppends(dir string, n int) (float64, error) {
	path := filepath.Join(dir, fmt.Sprintf("plasma-bench-dsync-%d", time.Now().UnixNano()))
	defer os.Remove(path)
	buf := make([]byte, 4096)
	// Written once first, so the timed writes change no extent metadata.
	if err := os.WriteFile(path, make([]byte, n*len(buf)), 0o600); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_DSYNC, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return rate(1, n, func(int) error {
		_, err := f.Write(buf)
		return err
	})
}

// sqliteCommits is the reference: p goroutines each committing n
// create-shaped transactions (3 rows) into one WAL database, as our
// store's checkpoint does.
func sqliteCommits(dir string, p, n int, relaxed bool) (float64, error) {
	path := filepath.Join(dir, fmt.Sprintf("plasma-bench-ref-%d.db", time.Now().UnixNano()))
	defer os.Remove(path)
	defer os.Remove(path + "-wal")
	defer os.Remove(path + "-shm")
	mode := "FULL"
	if relaxed {
		mode = "NORMAL"
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous("+mode+")&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(p)
	// The rows a create writes: the inode, the name, the directory's mtime.
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, v BLOB);
		CREATE TABLE names (parent INTEGER NOT NULL, name TEXT NOT NULL, ino INTEGER NOT NULL, PRIMARY KEY (parent, name)) WITHOUT ROWID;
		CREATE TABLE dirs (id INTEGER PRIMARY KEY, mtime INTEGER NOT NULL);
		INSERT INTO dirs VALUES (1, 0);`); err != nil {
		return 0, err
	}
	var id atomic.Int64
	return rate(p, n, func(int) error {
		var err error
		// Writers that find the database busy try again, as a real
		// server on SQLite would.
		for attempt := 0; attempt < 100; attempt++ {
			var tx *sql.Tx
			if tx, err = db.Begin(); err == nil {
				i := id.Add(1)
				if _, err = tx.Exec(`INSERT INTO t VALUES (?, ?, ?)`, i, "file-name", make([]byte, 64)); err == nil {
					if _, err = tx.Exec(`INSERT INTO names VALUES (1, ?, ?)`, fmt.Sprintf("f%d", i), i); err == nil {
						_, err = tx.Exec(`UPDATE dirs SET mtime = ? WHERE id = 1`, time.Now().UnixNano())
					}
				}
				if err == nil {
					err = tx.Commit()
				} else {
					tx.Rollback()
				}
			}
			if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") {
				break
			}
		}
		return err
	})
}

// selfCPU is this process's CPU time (user + system): the benchmark's
// clients.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
