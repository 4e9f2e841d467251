package meta

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// migrations are applied in order; schema_version records how many ran.
// Never edit a released entry: append a new one.
var migrations = []string{
	`CREATE TABLE inodes (
		ino INTEGER PRIMARY KEY, type INTEGER NOT NULL, mode INTEGER NOT NULL,
		owner TEXT NOT NULL, grp TEXT NOT NULL, size INTEGER NOT NULL, nlink INTEGER NOT NULL,
		mtime INTEGER NOT NULL, ctime INTEGER NOT NULL, rep INTEGER NOT NULL, seq INTEGER NOT NULL,
		target TEXT NOT NULL);
	CREATE TABLE names (parent INTEGER NOT NULL, name TEXT NOT NULL, ino INTEGER NOT NULL,
		PRIMARY KEY (parent, name)) WITHOUT ROWID;
	CREATE TABLE extents (ino INTEGER NOT NULL, idx INTEGER NOT NULL, count INTEGER NOT NULL,
		replicas BLOB NOT NULL, crcs BLOB NOT NULL, PRIMARY KEY (ino, idx)) WITHOUT ROWID;
	CREATE TABLE datanodes (id INTEGER PRIMARY KEY, identity TEXT NOT NULL UNIQUE,
		blocks INTEGER NOT NULL, enabled INTEGER NOT NULL);
	CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);`,
	// The namespace id (one row, made by migrate): datanode volumes record
	// it and refuse to join another namespace.
	`CREATE TABLE namespace (id TEXT NOT NULL);`,
	// The generation of the allocation that made an extent's blocks.
	`ALTER TABLE extents ADD COLUMN gen INTEGER NOT NULL DEFAULT 0;`,
	// Views for operators (views.go).
	sqliteViews,
	// Drain marks and removed datanodes (log format 2).
	`ALTER TABLE datanodes ADD COLUMN draining INTEGER NOT NULL DEFAULT 0;
	CREATE TABLE removed_datanodes (id INTEGER PRIMARY KEY, identity TEXT NOT NULL UNIQUE);`,
}

// SQL shared by SQLite and PostgreSQL; prepared once per store.
const (
	sqlLogSeq   = `INSERT INTO counters VALUES ('log_seq', $1) ON CONFLICT (name) DO UPDATE SET value=excluded.value WHERE excluded.value > counters.value`
	sqlInoLimit = `INSERT INTO counters VALUES ('ino_limit', $1) ON CONFLICT (name) DO UPDATE SET value=excluded.value WHERE excluded.value > counters.value`
	sqlPutInode = `INSERT INTO inodes VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)
				ON CONFLICT (ino) DO UPDATE SET type=excluded.type, mode=excluded.mode, owner=excluded.owner,
				grp=excluded.grp, size=excluded.size, nlink=excluded.nlink, mtime=excluded.mtime, ctime=excluded.ctime,
				rep=excluded.rep, seq=excluded.seq, target=excluded.target`
	sqlDelInode   = `DELETE FROM inodes WHERE ino = $1`
	sqlDelExtents = `DELETE FROM extents WHERE ino = $1`
	sqlDelName    = `DELETE FROM names WHERE parent = $1 AND name = $2`
	sqlPutName    = `INSERT INTO names VALUES ($1,$2,$3) ON CONFLICT (parent, name) DO UPDATE SET ino=excluded.ino`
	sqlPutExtent  = `INSERT INTO extents (ino, idx, count, replicas, crcs, gen) VALUES ($1,$2,$3,$4,$5,$6)`
	sqlPutNode    = `INSERT INTO datanodes (id, identity, blocks, enabled) VALUES ($1,$2,$3,$4) ON CONFLICT (id) DO UPDATE SET blocks=excluded.blocks, enabled=excluded.enabled`
	sqlDrainNode  = `UPDATE datanodes SET draining = $2 WHERE id = $1`
	sqlDelNode    = `DELETE FROM datanodes WHERE id = $1`
	sqlRemoveNode = `INSERT INTO removed_datanodes VALUES ($1,$2) ON CONFLICT (id) DO NOTHING`
)

// CASE, not SQLite's max() or PostgreSQL's greatest(): both engines run it.
const sqlTouch = `UPDATE inodes SET mtime = $2, ctime = CASE WHEN ctime > $2 THEN ctime ELSE $2 END WHERE ino = $1 AND mtime < $2`

var statements = []string{sqlTouch, sqlPutInode, sqlDelInode, sqlDelExtents, sqlDelName, sqlPutName, sqlPutExtent, sqlPutNode, sqlDrainNode, sqlDelNode, sqlRemoveNode, sqlLogSeq, sqlInoLimit}

// SQLite is the embedded metadata store: one database file in WAL mode.
type SQLite struct {
	// mu serialises Apply, Sync, Backup and Close: the namenode's
	// committer applies while a backup may be requested from elsewhere.
	mu        sync.Mutex
	db        *sql.DB
	stmts     map[string]*sql.Stmt // prepared once, bound to each transaction
	path      string
	namespace string
	readOnly  bool
}

// SQLiteOptions say how OpenSQLiteWith opens a metadata database.
type SQLiteOptions struct {
	// Relaxed is kept for callers: Apply never waits for the disk
	// (synchronous=NORMAL); commits become durable with Sync, which the
	// namenode calls before it acknowledges a durable commit.
	Relaxed bool
	// Format creates a new namespace (only the root directory and a new
	// random namespace id) in a database file that does not exist yet. It
	// refuses a file that holds a namespace.
	Format bool
	// Create is Format that opens an existing namespace instead of refusing
	// it (tests and in-process clusters).
	Create bool
	// ReadOnly opens an existing database for reading only (a backup of
	// a stopped namenode).
	ReadOnly bool
	// Upgrade migrates an older schema (PostgreSQL; SQLite files are
	// migrated at every open).
	Upgrade bool
	// AcceptLostWAL opens a database that was not closed cleanly although
	// its write-ahead log is gone, accepting the loss of the commits the
	// log held.
	AcceptLostWAL bool
}

// ErrNoDatabase is returned when the metadata database does not exist (or
// holds no namespace) and opening was not asked to format one.
var ErrNoDatabase = errors.New("no metadata database")

// ErrLostWAL is returned when the database was in use (not closed cleanly)
// and its write-ahead log, which holds the most recent commits, is missing.
var ErrLostWAL = errors.New("metadata write-ahead log missing")

// OpenSQLite opens the database at path, creating a new namespace if it does
// not exist, and migrates it. Apply writes the WAL without waiting for the
// disk; Sync makes everything applied durable (relaxed is kept for
// callers). The namenode command uses OpenSQLiteWith, which creates a
// namespace only when told to format.
func OpenSQLite(path string, relaxed bool) (*SQLite, error) {
	return OpenSQLiteWith(path, SQLiteOptions{Relaxed: relaxed, Create: true})
}

// OpenSQLiteWith opens the database at path as o says. The database and its
// -wal and -shm files are readable by their owner only.
func OpenSQLiteWith(path string, o SQLiteOptions) (*SQLite, error) {
	exists, err := fileExists(path)
	if err != nil {
		return nil, fmt.Errorf("metadata db %s: %w", path, err)
	}
	wal, err := fileExists(path + "-wal")
	if err != nil {
		return nil, fmt.Errorf("metadata db %s: %w", path, err)
	}
	create := (o.Format || o.Create) && !o.ReadOnly
	if !exists {
		if !create {
			msg := fmt.Sprintf("%s does not exist", path)
			if wal {
				msg += fmt.Sprintf(" (but its write-ahead log %s-wal does: the database was deleted or moved)", path)
			}
			return nil, fmt.Errorf("%w: %s. Restore the database (with its -wal file) or a backup of it; "+
				"or start the namenode with -format to create a new, empty namespace (datanode volumes that belong to another namespace will refuse to join it)", ErrNoDatabase, msg)
		}
		for _, suffix := range []string{"-wal", "-shm"} {
			if ok, _ := fileExists(path + suffix); ok {
				return nil, fmt.Errorf("metadata db %s does not exist but %s%s does: it belongs to a database that was deleted or moved; move it away before formatting a new namespace here", path, path, suffix)
			}
		}
		// Created here, owner-only: SQLite gives the -wal and -shm files
		// the database file's permissions.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create metadata db: %w", err)
		}
		f.Close()
		if err := syncDir(filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("create metadata db %s: %w", path, err)
		}
	} else if !o.ReadOnly {
		// Tighten files created by older versions (0644).
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if st, err := os.Stat(path + suffix); err == nil && st.Mode().Perm()&0o077 != 0 {
				os.Chmod(path+suffix, st.Mode().Perm()&0o700)
			}
		}
	}
	// NORMAL: a commit writes the WAL without fsync; the namenode makes
	// batches durable with Sync (one fdatasync of the WAL), for every
	// durable commit at once and for async ones within its window.
	sync := "NORMAL"
	q := url.Values{}
	if o.ReadOnly {
		q.Add("mode", "ro")
	} else {
		// Never let SQLite create the file: a missing database is refused
		// above, or created above with the right permissions.
		q.Add("mode", "rw")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+sync+")")
		q.Add("_txlock", "immediate")
	}
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open metadata db %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s := &SQLite{db: db, stmts: map[string]*sql.Stmt{}, path: path, readOnly: o.ReadOnly}
	if err := s.open(o, exists, wal); err != nil {
		db.Close()
		return nil, err
	}
	if o.ReadOnly {
		return s, nil
	}
	for _, q := range statements {
		st, err := db.Prepare(q)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("metadata db %s: prepare %q: %w", path, q, err)
		}
		s.stmts[q] = st
	}
	return s, nil
}

func fileExists(path string) (bool, error) {
	_, err := os.Stat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// open checks what the file holds, migrates it and marks it in use.
func (s *SQLite) open(o SQLiteOptions, existed, wal bool) error {
	var tables int
	if err := s.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'schema_version'`).Scan(&tables); err != nil {
		return fmt.Errorf("metadata db %s: %w", s.path, err)
	}
	fresh := tables == 0
	switch {
	case fresh && (o.ReadOnly || !(o.Format || o.Create)):
		return fmt.Errorf("%w: %s holds no PlasmaFS namespace; start the namenode with -format to create one", ErrNoDatabase, s.path)
	case !fresh && o.Format:
		return fmt.Errorf("metadata db %s already holds a namespace: -format creates a new namespace only where there is no database (remove or move it first, knowing that its files are lost)", s.path)
	}
	if !fresh {
		// A database in use (or killed) keeps its recent commits in the
		// WAL; without it, this file is an older state.
		var inUse int64
		err := s.db.QueryRow(`SELECT value FROM counters WHERE name = 'in_use'`).Scan(&inUse)
		if err != nil && err != sql.ErrNoRows {
			return fmt.Errorf("metadata db %s: %w", s.path, err)
		}
		if inUse != 0 && existed && !wal && !o.AcceptLostWAL {
			return fmt.Errorf("%w: %s was not closed cleanly, but its write-ahead log %s-wal, which holds the most recent commits, is gone. "+
				"Put the -wal file back (copying the database file alone is not a backup), or restore a backup made with 'plasma admin backup'; "+
				"to start from this older state anyway, accepting the loss of those commits, use -accept-lost-wal", ErrLostWAL, s.path, s.path)
		}
	}
	if o.ReadOnly {
		var v int
		if err := s.db.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil {
			return fmt.Errorf("metadata db %s: %w", s.path, err)
		}
		if v != len(migrations) {
			return fmt.Errorf("metadata db %s has schema version %d, this program %d: open it once with a namenode of this version", s.path, v, len(migrations))
		}
	} else if err := s.migrate(); err != nil {
		return fmt.Errorf("metadata db %s: %w", s.path, err)
	}
	if err := s.db.QueryRow(`SELECT id FROM namespace`).Scan(&s.namespace); err != nil {
		return fmt.Errorf("metadata db %s: namespace id: %w", s.path, err)
	}
	if o.ReadOnly {
		return nil
	}
	// Mark the database in use, in the database file itself (the
	// checkpoint), so a later loss of the WAL is noticed.
	if _, err := s.db.Exec(`INSERT INTO counters VALUES ('in_use', 1) ON CONFLICT (name) DO UPDATE SET value = 1`); err != nil {
		return fmt.Errorf("metadata db %s: %w", s.path, err)
	}
	if err := s.checkpoint("TRUNCATE"); err != nil {
		return fmt.Errorf("metadata db %s: %w", s.path, err)
	}
	return nil
}

func (s *SQLite) checkpoint(mode string) error {
	var busy, logFrames, done int
	if err := s.db.QueryRow(`PRAGMA wal_checkpoint(`+mode+`)`).Scan(&busy, &logFrames, &done); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	// busy: a reader (e.g. an offline backup) kept part of the WAL from
	// being copied; it is copied at a later checkpoint.
	return nil
}

// Namespace returns the namespace id: random, made when the namespace was
// created (formatted), and recorded by every datanode volume that joins.
func (s *SQLite) Namespace() string { return s.namespace }

func (s *SQLite) migrate() error {
	if _, err := s.db.Exec(`CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	var v int
	err := s.db.QueryRow(`SELECT version FROM schema_version`).Scan(&v)
	if err == sql.ErrNoRows {
		if _, err := s.db.Exec(`INSERT INTO schema_version VALUES (0)`); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if v > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this program (%d): upgrade plasma", v, len(migrations))
	}
	for ; v < len(migrations); v++ {
		tx, err := s.db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if v == 0 {
			now := time.Now().UnixNano()
			if _, err := tx.Exec(`INSERT INTO inodes VALUES (1, ?, 493, 'root', 'root', 0, 2, ?, ?, 0, 0, '')`, int(TypeDir), now, now); err != nil {
				tx.Rollback()
				return err
			}
		}
		if v == 1 {
			// A new namespace, or one made before namespaces had ids: its
			// volumes adopt this one when they next register.
			id := make([]byte, 16)
			if _, err := rand.Read(id); err != nil {
				tx.Rollback()
				return err
			}
			if _, err := tx.Exec(`INSERT INTO namespace VALUES (?)`, hex.EncodeToString(id)); err != nil {
				tx.Rollback()
				return err
			}
		}
		if _, err := tx.Exec(`UPDATE schema_version SET version = ?`, v+1); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// Load implements Store.
func (s *SQLite) Load(ctx context.Context) (*Snapshot, error) { return loadSnapshot(ctx, s.db) }

// loadSnapshot reads the whole metadata with SQL both engines share.
func loadSnapshot(ctx context.Context, db *sql.DB) (*Snapshot, error) {
	snap := &Snapshot{Blocks: map[uint64][]Extent{}, InoLimit: 2}
	rows, err := db.QueryContext(ctx, `SELECT ino, type, mode, owner, grp, size, nlink, mtime, ctime, rep, seq, target FROM inodes`)
	if err != nil {
		return nil, fmt.Errorf("load inodes: %w", err)
	}
	for rows.Next() {
		var a Inode
		if err := rows.Scan(&a.Ino, &a.Type, &a.Mode, &a.User, &a.Group, &a.Size, &a.Nlink, &a.Mtime, &a.Ctime, &a.Rep, &a.Seq, &a.Target); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load inodes: %w", err)
		}
		snap.Inodes = append(snap.Inodes, a)
		if a.Ino >= snap.InoLimit {
			snap.InoLimit = a.Ino + 1
		}
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("load inodes: %w", err)
	}
	rows, err = db.QueryContext(ctx, `SELECT parent, name, ino FROM names`)
	if err != nil {
		return nil, fmt.Errorf("load names: %w", err)
	}
	for rows.Next() {
		var e Entry
		if err := rows.Scan(&e.Parent, &e.Name, &e.Ino); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load names: %w", err)
		}
		snap.Entries = append(snap.Entries, e)
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("load names: %w", err)
	}
	rows, err = db.QueryContext(ctx, `SELECT ino, idx, count, replicas, crcs, gen FROM extents ORDER BY ino, idx`)
	if err != nil {
		return nil, fmt.Errorf("load extents: %w", err)
	}
	for rows.Next() {
		var ino uint64
		var x Extent
		var reps, crcs []byte
		if err := rows.Scan(&ino, &x.Index, &x.Count, &reps, &crcs, &x.Gen); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load extents: %w", err)
		}
		if len(reps)%12 != 0 || len(crcs) != 4*int(x.Count) {
			rows.Close()
			return nil, fmt.Errorf("load extents: inode %d index %d: corrupt row", ino, x.Index)
		}
		for i := 0; i < len(reps); i += 12 {
			x.Replicas = append(x.Replicas, Run{Node: binary.LittleEndian.Uint32(reps[i:]), Start: binary.LittleEndian.Uint64(reps[i+4:])})
		}
		x.CRC = make([]uint32, x.Count)
		for i := range x.CRC {
			x.CRC[i] = binary.LittleEndian.Uint32(crcs[4*i:])
		}
		snap.Blocks[ino] = append(snap.Blocks[ino], x)
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("load extents: %w", err)
	}
	rows, err = db.QueryContext(ctx, `SELECT id, identity, blocks, enabled, draining FROM datanodes`)
	if err != nil {
		return nil, fmt.Errorf("load datanodes: %w", err)
	}
	for rows.Next() {
		var d Datanode
		var draining bool
		if err := rows.Scan(&d.ID, &d.Identity, &d.Blocks, &d.Enabled, &draining); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load datanodes: %w", err)
		}
		snap.Datanodes = append(snap.Datanodes, d)
		if draining {
			snap.Draining = append(snap.Draining, d.ID)
		}
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("load datanodes: %w", err)
	}
	rows, err = db.QueryContext(ctx, `SELECT id, identity FROM removed_datanodes ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("load removed datanodes: %w", err)
	}
	for rows.Next() {
		var d RemovedDatanode
		if err := rows.Scan(&d.ID, &d.Identity); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load removed datanodes: %w", err)
		}
		snap.Removed = append(snap.Removed, d)
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("load removed datanodes: %w", err)
	}
	var lim uint64
	var logSeq int64
	if err := db.QueryRowContext(ctx, `SELECT value FROM counters WHERE name = 'log_seq'`).Scan(&logSeq); err != nil && err != sql.ErrNoRows {
		return nil, fmt.Errorf("load counters: %w", err)
	}
	snap.LogSeq = uint64(logSeq)
	err = db.QueryRowContext(ctx, `SELECT value FROM counters WHERE name = 'ino_limit'`).Scan(&lim)
	if err != nil && err != sql.ErrNoRows {
		return nil, fmt.Errorf("load counters: %w", err)
	}
	if lim > snap.InoLimit {
		snap.InoLimit = lim
	}
	return snap, nil
}

func closeRows(r *sql.Rows) error {
	err := r.Err()
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return err
}

// Apply implements Store.
func (s *SQLite) Apply(ctx context.Context, changes []*Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin metadata transaction: %w", err)
	}
	bound := map[string]*sql.Stmt{}
	exec := func(q string, args ...any) error {
		st := bound[q]
		if st == nil {
			p := s.stmts[q]
			if p == nil {
				return fmt.Errorf("statement not prepared: %q", q)
			}
			// Prepared at open time (preparing during a transaction
			// would wait for the only connection), bound to tx here.
			st = tx.Stmt(p)
			bound[q] = st
		}
		_, err := st.ExecContext(ctx, args...)
		return err
	}
	if err := apply(changes, exec); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit metadata transaction: %w", err)
	}
	return nil
}

// apply writes changes as statements of the SQL that SQLite and PostgreSQL
// share: exec runs (or queues) one statement in the batch's transaction.
// Replaying changes the store already holds leaves it as it is (upserts,
// block lists replaced whole, counters that only grow).
func apply(changes []*Change, exec func(q string, args ...any) error) error {
	last := lastPuts(changes)
	for ci, c := range changes {
		for ai, a := range c.PutInodes {
			if last[a.Ino] != (slot{ci, ai}) {
				continue
			}
			if err := exec(sqlPutInode, int64(a.Ino), int(a.Type), int64(a.Mode), a.User, a.Group, a.Size, int64(a.Nlink), a.Mtime, a.Ctime, int(a.Rep), int64(a.Seq), a.Target); err != nil {
				return fmt.Errorf("write inode %d: %w", a.Ino, err)
			}
		}
		for _, ino := range c.DelInodes {
			if err := exec(sqlDelInode, int64(ino)); err != nil {
				return fmt.Errorf("delete inode %d: %w", ino, err)
			}
			if c.Blocks == nil || c.Blocks[ino] == nil {
				if err := exec(sqlDelExtents, int64(ino)); err != nil {
					return fmt.Errorf("delete blocks of inode %d: %w", ino, err)
				}
			}
		}
		for _, k := range c.DelEntries {
			if err := exec(sqlDelName, int64(k.Parent), k.Name); err != nil {
				return fmt.Errorf("delete entry %q in %d: %w", k.Name, k.Parent, err)
			}
		}
		for _, e := range c.PutEntries {
			if err := exec(sqlPutName, int64(e.Parent), e.Name, int64(e.Ino)); err != nil {
				return fmt.Errorf("write entry %q in %d: %w", e.Name, e.Parent, err)
			}
		}
		for ino, xs := range c.Blocks {
			if err := exec(sqlDelExtents, int64(ino)); err != nil {
				return fmt.Errorf("replace blocks of inode %d: %w", ino, err)
			}
			for _, x := range xs {
				reps := make([]byte, 0, 12*len(x.Replicas))
				for _, r := range x.Replicas {
					reps = binary.LittleEndian.AppendUint32(reps, r.Node)
					reps = binary.LittleEndian.AppendUint64(reps, r.Start)
				}
				crcs := make([]byte, 0, 4*len(x.CRC))
				for _, c := range x.CRC {
					crcs = binary.LittleEndian.AppendUint32(crcs, c)
				}
				if err := exec(sqlPutExtent, int64(ino), int64(x.Index), int64(x.Count), reps, crcs, int64(x.Gen)); err != nil {
					return fmt.Errorf("write blocks of inode %d: %w", ino, err)
				}
			}
		}
		for _, d := range c.PutNodes {
			if err := exec(sqlPutNode, int64(d.ID), d.Identity, int64(d.Blocks), d.Enabled); err != nil {
				return fmt.Errorf("write datanode %s: %w", d.Identity, err)
			}
		}
		for _, id := range sortedIDs(c.Drains) {
			if err := exec(sqlDrainNode, int64(id), c.Drains[id]); err != nil {
				return fmt.Errorf("write drain mark of datanode %d: %w", id, err)
			}
		}
		for _, d := range c.RemoveNodes {
			if err := exec(sqlDelNode, int64(d.ID)); err != nil {
				return fmt.Errorf("remove datanode %s: %w", d.Identity, err)
			}
			if err := exec(sqlRemoveNode, int64(d.ID), d.Identity); err != nil {
				return fmt.Errorf("remove datanode %s: %w", d.Identity, err)
			}
		}
		for ino, mt := range c.Touch {
			if err := exec(sqlTouch, int64(ino), mt); err != nil {
				return fmt.Errorf("touch directory %d: %w", ino, err)
			}
		}
		if c.LogSeq != 0 {
			if err := exec(sqlLogSeq, int64(c.LogSeq)); err != nil {
				return fmt.Errorf("write commit log position: %w", err)
			}
		}
		if c.InoLimit != 0 {
			if err := exec(sqlInoLimit, int64(c.InoLimit)); err != nil {
				return fmt.Errorf("write inode limit: %w", err)
			}
		}
	}
	return nil
}

// Close implements Store. A database closed here is marked as closed
// cleanly: SQLite folds the WAL into it and removes the WAL.
func (s *SQLite) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.stmts {
		st.Close()
	}
	var err error
	if !s.readOnly {
		_, err = s.db.Exec(`UPDATE counters SET value = 0 WHERE name = 'in_use'`)
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// slot names one PutInodes element: change c, position i (-1: the inode's
// last mention in change c is a deletion).
type slot struct{ c, i int }

// testHookProbe, if set (by tests), is called once per map operation of
// lastPuts, so a test can count its work.
var testHookProbe func()

// lastPuts finds, in one pass, the one write of each inode that apply
// performs. Many commits of a batch touch the same inode (a directory's
// mtime for every file created in it), and one change may name an inode
// twice: only its last state is written. An inode deleted by a later change
// is not written at all; one written and deleted by the same change is
// written, then deleted (apply writes a change's inodes before its
// deletions).
func lastPuts(changes []*Change) map[uint64]slot {
	n := 0
	for _, c := range changes {
		n += len(c.PutInodes)
	}
	last := make(map[uint64]slot, n)
	for ci, c := range changes {
		for ai, a := range c.PutInodes {
			if testHookProbe != nil {
				testHookProbe()
			}
			last[a.Ino] = slot{ci, ai}
		}
		for _, ino := range c.DelInodes {
			if testHookProbe != nil {
				testHookProbe()
			}
			if s, ok := last[ino]; ok && s.c != ci {
				last[ino] = slot{ci, -1}
			}
		}
	}
	return last
}

// Sync implements Syncer: everything applied so far is in the WAL (or,
// after a checkpoint, in the fsynced database file); one fdatasync of the
// WAL makes it durable, exactly what synchronous=FULL does at every
// commit, but once per batch the namenode chooses.
func (s *SQLite) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.Open(s.path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no log: everything is in the database file
	}
	if err != nil {
		return fmt.Errorf("sync metadata log: %w", err)
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("sync metadata log %s-wal: %w", s.path, err)
	}
	return nil
}

// Backup writes a consistent copy of the metadata (everything applied so
// far) to the new file dst, owner-readable only, and makes it durable. It
// is serialised with Apply, so it may be called from any goroutine; commits
// wait while it runs. The copy is a database file without a WAL: it is
// restored by stopping the namenode, removing the database's -wal and -shm
// files, and putting the copy in the database's place.
func (s *SQLite) Backup(dst string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backupLocked(dst)
}

// backupLocked is Backup, s.mu held.
func (s *SQLite) backupLocked(dst string) error {
	if ok, err := fileExists(dst); err != nil || ok {
		if err == nil {
			err = fs.ErrExist
		}
		return fmt.Errorf("backup to %s: %w", dst, err)
	}
	dir := filepath.Dir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp*") // mode 0600
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpName)
	if _, err := s.db.Exec(`VACUUM INTO ?`, tmpName); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// The copy was taken from a database in use: mark it closed cleanly
	// (it has no WAL, and needs none).
	if err := markClosed(tmpName); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	f, err := os.OpenFile(tmpName, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return fmt.Errorf("backup: sync %s: %w", tmpName, err)
	}
	// A hard link never replaces a file that appeared meanwhile.
	if err := os.Link(tmpName, dst); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("backup: sync %s: %w", dir, err)
	}
	return nil
}

func markClosed(path string) error {
	q := url.Values{}
	q.Add("mode", "rw")
	q.Add("_pragma", "journal_mode(DELETE)")
	q.Add("_pragma", "synchronous(FULL)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return err
	}
	// A copy carries no commit-log position either: restored, it is a
	// checkpoint of its own and the namenode starts a new log.
	_, err = db.Exec(`UPDATE counters SET value = 0 WHERE name = 'in_use'; DELETE FROM counters WHERE name = 'log_seq'`)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Path returns the database file.
func (s *SQLite) Path() string { return s.path }
