package kv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/client"
)

// Files of a database directory.
const (
	dataName   = "kv"        // the database file
	lockName   = "lock"      // empty file; writers change its mtime to lock it
	vacuumName = "kv.vacuum" // vacuum writes the new file here, then renames it
)

// Options tune an open database.
type Options struct {
	// CacheBytes bounds the memory for cached blocks and decoded index
	// nodes (default 64 MiB). Blocks below the sealed offset stay valid
	// across refreshes.
	CacheBytes int64
	// RefreshInterval, if set, refreshes the snapshot in the background
	// this often.
	RefreshInterval time.Duration
	// TailCommits is how many small commits go to fresh blocks before one
	// compacts them (default 16); see the package documentation.
	TailCommits int
	// LocalBlockSize is the unit in which OpenLocal reads and caches a
	// local file (default 64 KiB). PlasmaFS files are read in their
	// blocks, which the client checks whole.
	LocalBlockSize int
}

// DB is an open database: a current snapshot, replaced by Refresh, and
// the caches shared by all its snapshots. Its methods are safe for
// concurrent use; each read uses the snapshot current when it starts.
type DB struct {
	c     *client.Client // nil: a local file
	path  string         // database directory (PlasmaFS) or file (local)
	opt   Options
	bs    int64
	local uint64 // cache identity of a local file

	blocks *lru[blockKey, []byte]
	nodes  *lru[nodeKey, *node]

	mu     sync.RWMutex
	cur    *Snapshot
	closed bool

	stop chan struct{}
	done chan struct{}
}

var localIDs atomic.Uint64

func newDB(c *client.Client, p string, opt Options) *DB {
	if opt.CacheBytes <= 0 {
		opt.CacheBytes = 64 << 20
	}
	if opt.TailCommits <= 0 {
		opt.TailCommits = 16
	}
	return &DB{c: c, path: p, opt: opt,
		blocks: newLRU[blockKey, []byte](opt.CacheBytes * 3 / 4),
		nodes:  newLRU[nodeKey, *node](opt.CacheBytes / 4)}
}

// CreateOptions shape a new database.
type CreateOptions struct {
	// MaxKeyLength limits key lengths (default DefaultMaxKeyLength, at
	// most MaxKeyLengthLimit).
	MaxKeyLength int
	// Rep is the replication of the database file (0: the cluster's
	// default).
	Rep int
	// Mode is the permission of the directory (default 0755); the files
	// get it without the execute bits.
	Mode fs.FileMode
}

// Create makes a new, empty database: the directory dir with its files
// (and missing parent directories), in one transaction. It fails if dir
// exists.
func Create(ctx context.Context, c *client.Client, dir string, opt CreateOptions) error {
	if opt.MaxKeyLength == 0 {
		opt.MaxKeyLength = DefaultMaxKeyLength
	}
	if opt.MaxKeyLength < 1 || opt.MaxKeyLength > MaxKeyLengthLimit {
		return fmt.Errorf("kv: key length limit %d out of range 1..%d", opt.MaxKeyLength, MaxKeyLengthLimit)
	}
	mode := opt.Mode
	if mode == 0 {
		mode = 0o755
	}
	tx := c.Begin()
	defer tx.Abort(ctx)
	if parent := path.Dir(path.Clean(dir)); parent != "/" && parent != "." {
		if _, err := tx.MkdirAll(ctx, parent, 0o755); err != nil {
			return fmt.Errorf("kv create %s: %w", dir, err)
		}
	}
	if _, err := tx.Mkdir(ctx, dir, mode); err != nil {
		return fmt.Errorf("kv create %s: %w", dir, err)
	}
	fmode := mode &^ 0o111
	if _, err := tx.Create(ctx, path.Join(dir, lockName), client.CreateOptions{Mode: fmode}); err != nil {
		return fmt.Errorf("kv create %s: %w", dir, err)
	}
	f, err := tx.CreateFile(ctx, path.Join(dir, dataName), client.CreateOptions{Mode: fmode, Rep: opt.Rep})
	if err != nil {
		return fmt.Errorf("kv create %s: %w", dir, err)
	}
	tr := trailer{seq: 1, maxKey: uint32(opt.MaxKeyLength), live: trailerSize}
	if _, err := f.WriteAt(tr.encode(), 0); err != nil {
		return fmt.Errorf("kv create %s: %w", dir, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("kv create %s: %w", dir, err)
	}
	return nil
}

// Open opens the database in directory dir with its newest version as
// the current snapshot. Reading needs no namenode request once it is open
// (the block list came with the file); Refresh costs one.
func Open(ctx context.Context, c *client.Client, dir string, opt Options) (*DB, error) {
	db := newDB(c, path.Clean(dir), opt)
	s, err := db.openSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	db.cur = s
	db.startRefresher()
	return db, nil
}

// OpenLocal opens a database file on the local filesystem read-only: a
// copy of a database's kv file (plasma get DIR/kv FILE). Refresh reopens
// it.
func OpenLocal(file string, opt Options) (*DB, error) {
	db := newDB(nil, file, opt)
	db.local = localIDs.Add(1) << 48 // far from inode numbers
	db.bs = 64 << 10
	if opt.LocalBlockSize > 0 {
		db.bs = int64(opt.LocalBlockSize)
	}
	s, err := db.openSnapshot(context.Background())
	if err != nil {
		return nil, err
	}
	db.cur = s
	db.startRefresher()
	return db, nil
}

func (db *DB) startRefresher() {
	if db.opt.RefreshInterval <= 0 {
		return
	}
	db.stop, db.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(db.done)
		t := time.NewTicker(db.opt.RefreshInterval)
		defer t.Stop()
		for {
			select {
			case <-db.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				db.Refresh(ctx) // a failure keeps the current snapshot; the next tick tries again
				cancel()
			}
		}
	}()
}

// Path returns the database's directory (or local file).
func (db *DB) Path() string { return db.path }

// Client returns the PlasmaFS client the database was opened with (nil
// for a local file).
func (db *DB) Client() *client.Client { return db.c }

// openSnapshot opens the newest version.
func (db *DB) openSnapshot(ctx context.Context) (*Snapshot, error) {
	if db.c == nil {
		return db.openLocalSnapshot()
	}
	s, err := db.openSnapshotOnce(ctx)
	if err != nil && lostConnection(ctx, err) {
		s, err = db.openSnapshotOnce(ctx) // the client has replaced its connection
	}
	return s, err
}

// lostConnection says err is a lost namenode connection, not an answer:
// the first request of a new transaction may be tried again, as the
// client replaces a broken connection for later transactions.
func lostConnection(ctx context.Context, err error) bool {
	var ne *client.Error
	return ctx.Err() == nil && !errors.As(err, &ne) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, context.Canceled)
}

func (db *DB) openSnapshotOnce(ctx context.Context) (*Snapshot, error) {
	p := path.Join(db.path, dataName)
	tx := db.c.Begin()
	// The file reads with a context of the snapshot's lifetime, not the
	// caller's: the snapshot outlives the call that opened it.
	fctx, cancel := context.WithCancel(context.Background())
	end := func() {
		actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
		tx.Abort(actx)
		acancel()
		cancel()
	}
	// The caller's ctx still bounds the opening itself.
	stop := context.AfterFunc(ctx, cancel)
	f, err := tx.Open(fctx, p)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		end()
		if errors.Is(err, client.ErrNotFound) {
			return nil, fmt.Errorf("%s: not a Plasma KV database: %w", db.path, err)
		}
		return nil, err
	}
	if db.bs == 0 {
		fi, err := tx.StatInode(ctx, f.Ino())
		if err != nil {
			end()
			return nil, err
		}
		db.bs = int64(fi.Blocksize)
	}
	s := &Snapshot{db: db, src: f, file: f.Ino(), size: f.Size(), bs: db.bs, end: end, verifiedBlocks: true}
	if err := s.loadTrailer(); err != nil {
		end()
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	s.refs.Store(1)
	return s, nil
}

func (db *DB) openLocalSnapshot() (*Snapshot, error) {
	f, err := os.Open(db.path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &Snapshot{db: db, src: f, file: db.local + uint64(fi.ModTime().UnixNano()&0xffffffffff), size: fi.Size(), bs: db.bs,
		end: func() { f.Close() }}
	if err := s.loadTrailer(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", db.path, err)
	}
	s.refs.Store(1)
	return s, nil
}

func (s *Snapshot) loadTrailer() error {
	if s.size < trailerSize {
		return corruptf("file of %d bytes", s.size)
	}
	b := make([]byte, trailerSize)
	if n, err := s.src.ReadAt(b, s.size-trailerSize); n < trailerSize {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	tr, err := decodeTrailer(b, s.size)
	if err != nil {
		return err
	}
	s.tr = tr
	return nil
}

// Snapshot returns the current snapshot; Release it when done. It
// returns nil once the database is closed.
func (db *DB) Snapshot() *Snapshot {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return nil
	}
	db.cur.acquire()
	return db.cur
}

// Refresh makes the newest committed version the current snapshot.
// Reads in progress finish on the snapshot they started with.
func (db *DB) Refresh(ctx context.Context) error {
	s, err := db.openSnapshot(ctx)
	if err != nil {
		return err
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		s.Release()
		return ErrClosed
	}
	old := db.cur
	db.cur = s
	db.mu.Unlock()
	old.Release()
	return nil
}

// Close stops the background refresh and releases the current snapshot
// (values and iterators still open keep theirs until they are closed).
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	cur := db.cur
	db.mu.Unlock()
	if db.stop != nil {
		close(db.stop)
		<-db.done
	}
	cur.Release()
	return nil
}

func (db *DB) snap() (*Snapshot, error) {
	s := db.Snapshot()
	if s == nil {
		return nil, ErrClosed
	}
	return s, nil
}

// Get returns the value of key in the current snapshot, or an error
// matching ErrNotFound. For large values use Lookup, which streams.
func (db *DB) Get(key []byte) ([]byte, error) {
	s, err := db.snap()
	if err != nil {
		return nil, err
	}
	defer s.Release()
	return s.Get(key)
}

// Lookup opens key's value in the current snapshot for streaming; close
// the Value when done.
func (db *DB) Lookup(key []byte) (*Value, error) {
	s, err := db.snap()
	if err != nil {
		return nil, err
	}
	defer s.Release()
	return s.Lookup(key)
}

// Scan iterates over the keys r selects in the current snapshot; close
// the Iterator when done.
func (db *DB) Scan(r Range) *Iterator {
	s, err := db.snap()
	if err != nil {
		return &Iterator{err: err, closed: true}
	}
	defer s.Release()
	return s.Scan(r)
}

// Count returns how many keys r selects in the current snapshot.
func (db *DB) Count(r Range) (int64, error) {
	s, err := db.snap()
	if err != nil {
		return 0, err
	}
	defer s.Release()
	return s.Count(r)
}

// Stats describes the current snapshot.
func (db *DB) Stats() Stats {
	s, err := db.snap()
	if err != nil {
		return Stats{}
	}
	defer s.Release()
	return s.Stats()
}
