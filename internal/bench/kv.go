package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/kv"
	bolt "go.etcd.io/bbolt"
)

// KVOptions configure the Plasma KV benchmark (seed 002, scaled down).
type KVOptions struct {
	Dir       string // PlasmaFS directory for the databases (created, removed after)
	LocalDir  string // local directory for the references
	Keys      int    // keys of the HTTP database (seed: 116,936)
	ValueSize int    // their average value size (seed: ≈30 KB)
	Conns     int    // HTTP keep-alive connections (seed: 100)
	Requests  int    // GETs per HTTP measurement
	Cache     int64  // kv cache (blocks + index) of the servers
	SmallKeys int    // keys of 1 KB for the Go API measurements
	Lookups   int    // Go API lookups per client
	Clients   []int  // Go API lookup clients
	Inserts   int    // single-key commits
}

func (o *KVOptions) defaults() {
	if o.Dir == "" {
		o.Dir = "/plasma-bench-kv"
	}
	if o.LocalDir == "" {
		o.LocalDir = os.TempDir()
	}
	if o.Keys <= 0 {
		o.Keys = 4000
	}
	if o.ValueSize <= 0 {
		o.ValueSize = 30000
	}
	if o.Conns <= 0 {
		o.Conns = 100
	}
	if o.Requests <= 0 {
		o.Requests = 50000
	}
	if o.Cache <= 0 {
		o.Cache = 32 << 20
	}
	if o.SmallKeys <= 0 {
		o.SmallKeys = 20000
	}
	if o.Lookups <= 0 {
		o.Lookups = 20000
	}
	if len(o.Clients) == 0 {
		o.Clients = []int{1, 8}
	}
	if o.Inserts <= 0 {
		o.Inserts = 300
	}
}

// kvValue is value i of the benchmark: sizes vary ±50 % around avg.
func kvValue(i, avg int) io.Reader {
	r := rand.New(rand.NewPCG(uint64(i), 2))
	n := avg/2 + r.IntN(avg+1)
	var seed [32]byte
	seed[0], seed[1], seed[2] = byte(i), byte(i>>8), byte(i>>16)
	return io.LimitReader(rand.NewChaCha8(seed), int64(n))
}

func kvKey(i int) string { return fmt.Sprintf("k%07d", i) }

// KV measures Plasma KV beside references run now on the same machine:
// the bulk load against plasma put of the same bytes; HTTP lookups of
// ≈30 KB values (seed 002's shape, scaled down) against the same server
// code over a local copy of the database file and against net/http
// serving the values as static files; Go API lookups of 1 KB values
// against the local copy, bbolt and SQLite; single-key commits and batched
// HTTP PUTs against bbolt and SQLite commits.
func KV(ctx context.Context, c *client.Client, o KVOptions) (*Report, error) {
	o.defaults()
	rep := &Report{Bench: "kv", Started: time.Now(), Params: fmt.Sprintf("keys=%d value≈%dB conns=%d requests=%d cache=%dMiB small-keys=%d lookups=%d clients=%v inserts=%d",
		o.Keys, o.ValueSize, o.Conns, o.Requests, o.Cache>>20, o.SmallKeys, o.Lookups, o.Clients, o.Inserts)}
	base := fmt.Sprintf("%s/run-%d", o.Dir, time.Now().UnixNano())
	local, err := os.MkdirTemp(o.LocalDir, "plasma-bench-kv-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(local)
	defer removeTree(context.Background(), c, base)

	// 1. Bulk load: one writer, one commit, values streamed.
	seedDB := base + "/seed002"
	if err := kv.Create(ctx, c, seedDB, kv.CreateOptions{}); err != nil {
		return nil, err
	}
	db, err := kv.Open(ctx, c, seedDB, kv.Options{CacheBytes: o.Cache})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var total int64
	loadTime, err := timeIt(func() error {
		w, err := db.Begin(ctx)
		if err != nil {
			return err
		}
		for i := 0; i < o.Keys; i++ {
			cr := &countReader{r: kvValue(i, o.ValueSize)}
			if err := w.PutReader([]byte(kvKey(i)), cr); err != nil {
				w.Abort(ctx)
				return err
			}
			total += cr.n
		}
		return w.Commit(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("bulk load: %w", err)
	}
	putTime, err := timeIt(func() error {
		readers := make([]io.Reader, o.Keys)
		for i := range readers {
			readers[i] = kvValue(i, o.ValueSize)
		}
		_, err := c.CopyIn(ctx, io.MultiReader(readers...), base+"/put-reference", client.CopyOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("put reference: %w", err)
	}
	rep.add(Result{Name: fmt.Sprintf("bulk load %d keys (%.0f MB), one commit", o.Keys, float64(total)/1e6), Unit: "MB/s",
		Ours: mbps(total, loadTime), RefName: "plasma put of the same bytes", Ref: mbps(total, putTime)})

	// 2. HTTP lookups, seed 002's shape.
	kvFile := filepath.Join(local, "seed002.kv")
	if err := copyOut(ctx, c, seedDB+"/kv", kvFile); err != nil {
		return nil, err
	}
	bs := db.Stats().Blocksize
	ldb, err := kv.OpenLocal(kvFile, kv.Options{CacheBytes: o.Cache, LocalBlockSize: bs})
	if err != nil {
		return nil, err
	}
	defer ldb.Close()
	static := filepath.Join(local, "static")
	if err := writeStatic(static, o.Keys, o.ValueSize); err != nil {
		return nil, err
	}
	before, err := clientx.NamenodeStats(ctx, c)
	if err != nil {
		return nil, err
	}
	mine := clientx.NamenodeRequests(c)
	ours, oursMB, err := httpLoad(kv.NewServer(db, kv.ServerOptions{}), o)
	if err != nil {
		return nil, err
	}
	mine = clientx.NamenodeRequests(c) - mine
	after, err := clientx.NamenodeStats(ctx, c)
	if err != nil {
		return nil, err
	}
	ref, _, err := httpLoad(kv.NewServer(ldb, kv.ServerOptions{}), o)
	if err != nil {
		return nil, err
	}
	stat, _, err := httpLoad(http.FileServer(http.Dir(static)), o)
	if err != nil {
		return nil, err
	}
	// The second NamenodeStats call is the only namenode request expected.
	note := fmt.Sprintf("%.0f MB/s; namenode requests by the server during the lookups: %d; by anyone: %d%s", oursMB, mine, after.Requests-before.Requests-1, opDelta(before, after))
	name := fmt.Sprintf("HTTP GET of ≈%d KB values, %d keep-alive connections", o.ValueSize/1000, o.Conns)
	rep.add(Result{Name: name, Unit: "req/s", Ours: ours, RefName: "same server, local copy of the file (same block size)", Ref: ref,
		Seed: "679 req/s (single-threaded demo server)", Note: note})
	rep.add(Result{Name: name, Unit: "req/s", Ours: ours, RefName: "net/http static files, local disk", Ref: stat})

	// 3. Go API point lookups of 1 KB values.
	smallDB := base + "/small"
	if err := kv.Create(ctx, c, smallDB, kv.CreateOptions{}); err != nil {
		return nil, err
	}
	sdb, err := kv.Open(ctx, c, smallDB, kv.Options{CacheBytes: o.Cache})
	if err != nil {
		return nil, err
	}
	defer sdb.Close()
	value := func(i int) []byte {
		b := make([]byte, 1000)
		rand.NewChaCha8([32]byte{byte(i), byte(i >> 8), 1}).Read(b)
		return b
	}
	w, err := sdb.Begin(ctx)
	if err != nil {
		return nil, err
	}
	for i := 0; i < o.SmallKeys; i++ {
		w.Put([]byte(kvKey(i)), value(i))
	}
	if err := w.Commit(ctx); err != nil {
		return nil, err
	}
	smallFile := filepath.Join(local, "small.kv")
	if err := copyOut(ctx, c, smallDB+"/kv", smallFile); err != nil {
		return nil, err
	}
	lsdb, err := kv.OpenLocal(smallFile, kv.Options{CacheBytes: o.Cache, LocalBlockSize: bs})
	if err != nil {
		return nil, err
	}
	defer lsdb.Close()
	sq, err := newSQLiteKV(filepath.Join(local, "ref.db"))
	if err != nil {
		return nil, err
	}
	defer sq.Close()
	if err := sq.load(o.SmallKeys, value); err != nil {
		return nil, err
	}
	bb, err := newBoltKV(filepath.Join(local, "ref.bolt"))
	if err != nil {
		return nil, err
	}
	defer bb.Close()
	if err := bb.load(o.SmallKeys, value); err != nil {
		return nil, err
	}
	for _, p := range o.Clients {
		get := func(d *kv.DB) func(int) error {
			return func(int) error {
				_, err := d.Get([]byte(kvKey(rand.IntN(o.SmallKeys))))
				return err
			}
		}
		ours, err := rate(p, o.Lookups, get(sdb))
		if err != nil {
			return nil, err
		}
		loc, err := rate(p, o.Lookups, get(lsdb))
		if err != nil {
			return nil, err
		}
		sqlRate, err := rate(p, o.Lookups, func(int) error { return sq.get(kvKey(rand.IntN(o.SmallKeys))) })
		if err != nil {
			return nil, err
		}
		boltRate, err := rate(p, o.Lookups, func(int) error { return bb.get(kvKey(rand.IntN(o.SmallKeys))) })
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("Go API lookups, 1 KB values, %d clients", p)
		rep.add(Result{Name: name, Unit: "lookups/s", Ours: ours, RefName: "same code, local copy of the file (same block size)", Ref: loc})
		rep.add(Result{Name: name, Unit: "lookups/s", Ours: ours, RefName: "bbolt, local file (read transaction per lookup)", Ref: boltRate})
		rep.add(Result{Name: name, Unit: "lookups/s", Ours: ours, RefName: "SQLite table, local file", Ref: sqlRate})
	}

	// 4. Inserts of 1 KB values: single-key commits; batched HTTP PUTs.
	var seq atomic.Int64
	single, err := rate(1, o.Inserts, func(int) error {
		w, err := sdb.Begin(ctx)
		if err != nil {
			return err
		}
		i := int(seq.Add(1))
		w.Put([]byte(fmt.Sprintf("new%07d", i)), value(i))
		return w.Commit(ctx)
	})
	if err != nil {
		return nil, err
	}
	sqlSingle, err := rate(1, o.Inserts, func(int) error { i := int(seq.Add(1)); return sq.put(fmt.Sprintf("new%07d", i), value(i)) })
	if err != nil {
		return nil, err
	}
	boltSingle, err := rate(1, o.Inserts, func(int) error { i := int(seq.Add(1)); return bb.put(fmt.Sprintf("new%07d", i), value(i)) })
	if err != nil {
		return nil, err
	}
	rep.add(Result{Name: "Go API insert, 1 KB value, one commit each (durable)", Unit: "commits/s", Ours: single,
		RefName: "SQLite insert commits (WAL, synchronous=FULL)", Ref: sqlSingle, Note: fmt.Sprintf("garbage after: %d MB", sdb.Stats().Garbage>>20)})
	rep.add(Result{Name: "Go API insert, 1 KB value, one commit each (durable)", Unit: "commits/s", Ours: single,
		RefName: "bbolt Update per key (fsync each)", Ref: boltSingle})
	for _, p := range o.Clients {
		if p == 1 {
			continue
		}
		put, err := httpPuts(sdb, p, o.Inserts, value, &seq)
		if err != nil {
			return nil, err
		}
		sqlPut, err := rate(p, o.Inserts, func(int) error { i := int(seq.Add(1)); return sq.put(fmt.Sprintf("new%07d", i), value(i)) })
		if err != nil {
			return nil, err
		}
		// bbolt's Batch coalesces concurrent writers into one commit, as
		// the writable server does with its clients' PUTs.
		boltPut, err := rate(p, o.Inserts, func(int) error { i := int(seq.Add(1)); return bb.batchPut(fmt.Sprintf("new%07d", i), value(i)) })
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("HTTP PUT, 1 KB values, %d clients (server batches commits)", p)
		rep.add(Result{Name: name, Unit: "puts/s", Ours: put, RefName: fmt.Sprintf("SQLite insert commits, %d writers", p), Ref: sqlPut})
		rep.add(Result{Name: name, Unit: "puts/s", Ours: put, RefName: fmt.Sprintf("bbolt Batch, %d writers", p), Ref: boltPut})
	}
	return rep, nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func copyOut(ctx context.Context, c *client.Client, name, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if err := getTo(ctx, c, name, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeStatic writes the HTTP database's values as files named by key.
func writeStatic(dir string, keys, avg int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := 0; i < keys; i++ {
		f, err := os.Create(filepath.Join(dir, kvKey(i)))
		if err != nil {
			return err
		}
		_, err = io.Copy(f, kvValue(i, avg))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// httpLoad serves h on a loopback port and runs o.Requests GETs of
// random keys over o.Conns keep-alive connections; it returns requests/s
// and MB/s.
func httpLoad(h http.Handler, o KVOptions) (float64, float64, error) {
	if s, ok := h.(*kv.Server); ok {
		defer s.Close()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: o.Conns, MaxConnsPerHost: o.Conns, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	url := "http://" + ln.Addr().String() + "/"
	var bytes atomic.Int64
	per := o.Requests / o.Conns
	get := func(int) error {
		resp, err := hc.Get(url + kvKey(rand.IntN(o.Keys)))
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("GET: %s", resp.Status)
		}
		bytes.Add(n)
		return err
	}
	// Warm up: open the connections, fill the caches a little.
	if _, err := rate(o.Conns, max(per/10, 1), get); err != nil {
		return 0, 0, err
	}
	bytes.Store(0)
	start := time.Now()
	r, err := rate(o.Conns, per, get)
	el := time.Since(start)
	return r, mbps(bytes.Load(), el), err
}

// httpPuts measures PUTs from p clients through a writable server.
func httpPuts(db *kv.DB, p, n int, value func(int) []byte, seq *atomic.Int64) (float64, error) {
	s := kv.NewServer(db, kv.ServerOptions{Writable: true, BatchDelay: 2 * time.Millisecond})
	defer s.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	srv := &http.Server{Handler: s}
	go srv.Serve(ln)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: p}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	url := "http://" + ln.Addr().String() + "/"
	return rate(p, n, func(int) error {
		i := int(seq.Add(1))
		req, _ := http.NewRequest("PUT", url+fmt.Sprintf("new%07d", i), strings.NewReader(string(value(i))))
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("PUT: %s", resp.Status)
		}
		return nil
	})
}

// sqliteKV is the local key/value reference: one table in a WAL database
// with synchronous=FULL.
type sqliteKV struct {
	db     *sql.DB
	path   string
	getStm *sql.Stmt
	putStm *sql.Stmt
}

func newSQLiteKV(path string) (*sqliteKV, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(16)
	if _, err := db.Exec(`CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID`); err != nil {
		db.Close()
		return nil, err
	}
	s := &sqliteKV{db: db, path: path}
	if s.getStm, err = db.Prepare(`SELECT v FROM kv WHERE k = ?`); err != nil {
		db.Close()
		return nil, err
	}
	if s.putStm, err = db.Prepare(`INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)`); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *sqliteKV) load(n int, value func(int) []byte) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if _, err := tx.Stmt(s.putStm).Exec([]byte(kvKey(i)), value(i)); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

func (s *sqliteKV) get(k string) error {
	var v []byte
	err := s.getStm.QueryRow([]byte(k)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: %s missing", k)
	}
	return err
}

func (s *sqliteKV) put(k string, v []byte) error {
	_, err := s.putStm.Exec([]byte(k), v)
	return err
}

func (s *sqliteKV) Close() error { return s.db.Close() }

// boltKV is the B+-tree reference: bbolt (the design Plasma KV's file
// follows: copy-on-write pages, one writer) over a local file, one bucket,
// fsync on every commit (bbolt's default).
type boltKV struct{ db *bolt.DB }

var boltBucket = []byte("kv")

func newBoltKV(path string) (*boltKV, error) {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(boltBucket); return err }); err != nil {
		db.Close()
		return nil, err
	}
	return &boltKV{db: db}, nil
}

func (b *boltKV) load(n int, value func(int) []byte) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(boltBucket)
		for i := 0; i < n; i++ {
			if err := bk.Put([]byte(kvKey(i)), value(i)); err != nil {
				return err
			}
		}
		return nil
	})
}

// get copies the value out, as kv's Get does: bbolt's slice is only
// valid inside the transaction.
func (b *boltKV) get(k string) error {
	return b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(boltBucket).Get([]byte(k))
		if v == nil {
			return fmt.Errorf("bbolt: %s missing", k)
		}
		_ = append([]byte(nil), v...)
		return nil
	})
}

func (b *boltKV) put(k string, v []byte) error {
	return b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(boltBucket).Put([]byte(k), v) })
}

func (b *boltKV) batchPut(k string, v []byte) error {
	return b.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(boltBucket).Put([]byte(k), v) })
}

func (b *boltKV) Close() error { return b.db.Close() }

// removeTree removes a PlasmaFS directory tree (the benchmark's own).
func removeTree(ctx context.Context, c *client.Client, dir string) {
	var walk func(p string) error
	walk = func(p string) error {
		var ents []client.DirEntry
		if err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			var err error
			ents, err = tx.ReadDir(ctx, p)
			return err
		}); err != nil {
			return err
		}
		for _, e := range ents {
			child := p + "/" + e.Name
			if e.Type == client.TypeDir {
				if err := walk(child); err != nil {
					return err
				}
				continue
			}
			if err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, child) }); err != nil {
				return err
			}
		}
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Rmdir(ctx, p) })
	}
	walk(dir)
	parent := filepath.Dir(dir)
	c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Rmdir(ctx, parent) }) // if empty
}

// opDelta lists the namenode operations counted between two Stats
// (without the stats request that took the second).
func opDelta(a, b clientx.Stats) string {
	var out []string
	for op, n := range b.PerOp {
		d := n - a.PerOp[op]
		if op == "stats" {
			d--
		}
		if d > 0 {
			out = append(out, fmt.Sprintf("%s %d", op, d))
		}
	}
	if len(out) == 0 {
		return ""
	}
	sort.Strings(out)
	return " (" + strings.Join(out, ", ") + ")"
}
