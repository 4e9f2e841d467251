package meta

import (
	"database/sql"
	"encoding/binary"
	"fmt"
	"net/url"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
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
}

// SQL shared by SQLite and PostgreSQL; prepared once per store.
const (
	sqlPutInode = `INSERT INTO inodes VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)
				ON CONFLICT (ino) DO UPDATE SET type=excluded.type, mode=excluded.mode, owner=excluded.owner,
				grp=excluded.grp, size=excluded.size, nlink=excluded.nlink, mtime=excluded.mtime, ctime=excluded.ctime,
				rep=excluded.rep, seq=excluded.seq, target=excluded.target`
	sqlDelInode   = `DELETE FROM inodes WHERE ino = $1`
	sqlDelExtents = `DELETE FROM extents WHERE ino = $1`
	sqlDelName    = `DELETE FROM names WHERE parent = $1 AND name = $2`
	sqlPutName    = `INSERT INTO names VALUES ($1,$2,$3) ON CONFLICT (parent, name) DO UPDATE SET ino=excluded.ino`
	sqlPutExtent  = `INSERT INTO extents VALUES ($1,$2,$3,$4,$5)`
	sqlPutNode    = `INSERT INTO datanodes VALUES ($1,$2,$3,$4) ON CONFLICT (id) DO UPDATE SET blocks=excluded.blocks, enabled=excluded.enabled`
)

const sqlTouch = `UPDATE inodes SET mtime = $2 WHERE ino = $1 AND mtime < $2`

var statements = []string{sqlTouch, sqlPutInode, sqlDelInode, sqlDelExtents, sqlDelName, sqlPutName, sqlPutExtent, sqlPutNode}

// SQLite is the embedded metadata store: one database file in WAL mode.
type SQLite struct {
	db    *sql.DB
	stmts map[string]*sql.Stmt // prepared once, bound to each transaction
}

// OpenSQLite opens (creating and migrating if needed) the database at path.
// With relaxed set, commits are acknowledged before the WAL is fsynced
// (synchronous=NORMAL): a crash may lose the last commits, never corrupt.
func OpenSQLite(path string, relaxed bool) (*SQLite, error) {
	sync := "FULL"
	if relaxed {
		sync = "NORMAL"
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open metadata db %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s := &SQLite{db: db, stmts: map[string]*sql.Stmt{}}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("metadata db %s: %w", path, err)
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
			if _, err := tx.Exec(`INSERT INTO inodes VALUES (1, ?, 493, 'root', 'root', 0, 2, ?, ?, 0, 0, '')`, int(wire.TypeDir), now, now); err != nil {
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
func (s *SQLite) Load() (*Snapshot, error) {
	snap := &Snapshot{Blocks: map[uint64][]wire.Extent{}, InoLimit: 2}
	rows, err := s.db.Query(`SELECT ino, type, mode, owner, grp, size, nlink, mtime, ctime, rep, seq, target FROM inodes`)
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
	rows, err = s.db.Query(`SELECT parent, name, ino FROM names`)
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
	rows, err = s.db.Query(`SELECT ino, idx, count, replicas, crcs FROM extents ORDER BY ino, idx`)
	if err != nil {
		return nil, fmt.Errorf("load extents: %w", err)
	}
	for rows.Next() {
		var ino uint64
		var x wire.Extent
		var reps, crcs []byte
		if err := rows.Scan(&ino, &x.Index, &x.Count, &reps, &crcs); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load extents: %w", err)
		}
		if len(reps)%12 != 0 || len(crcs) != 4*int(x.Count) {
			rows.Close()
			return nil, fmt.Errorf("load extents: inode %d index %d: corrupt row", ino, x.Index)
		}
		for i := 0; i < len(reps); i += 12 {
			x.Replicas = append(x.Replicas, wire.Run{Node: binary.LittleEndian.Uint32(reps[i:]), Start: binary.LittleEndian.Uint64(reps[i+4:])})
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
	rows, err = s.db.Query(`SELECT id, identity, blocks, enabled FROM datanodes`)
	if err != nil {
		return nil, fmt.Errorf("load datanodes: %w", err)
	}
	for rows.Next() {
		var d Datanode
		if err := rows.Scan(&d.ID, &d.Identity, &d.Blocks, &d.Enabled); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load datanodes: %w", err)
		}
		snap.Datanodes = append(snap.Datanodes, d)
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("load datanodes: %w", err)
	}
	var lim uint64
	err = s.db.QueryRow(`SELECT value FROM counters WHERE name = 'ino_limit'`).Scan(&lim)
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
func (s *SQLite) Apply(changes []*Change) error {
	tx, err := s.db.Begin()
	if err != nil {
		return fmt.Errorf("begin metadata transaction: %w", err)
	}
	if err := apply(tx, changes, s.prepared); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit metadata transaction: %w", err)
	}
	return nil
}

// prepared returns the statement for q, prepared at open time (preparing
// during a transaction would wait for the only connection).
func (s *SQLite) prepared(q string) (*sql.Stmt, error) {
	if st := s.stmts[q]; st != nil {
		return st, nil
	}
	return nil, fmt.Errorf("statement not prepared: %q", q)
}

// apply writes changes through tx with SQL that SQLite and PostgreSQL share.
// prepare returns a statement prepared on the database (it is bound to tx
// here).
func apply(tx *sql.Tx, changes []*Change, prepare func(q string) (*sql.Stmt, error)) error {
	bound := map[string]*sql.Stmt{}
	var putInode, delInode, putName, delName, delExt, putExt, putNode, touch *sql.Stmt
	prep := func(st **sql.Stmt, q string) (*sql.Stmt, error) {
		if *st == nil {
			if b := bound[q]; b != nil {
				*st = b
				return b, nil
			}
			s, err := prepare(q)
			if err != nil {
				return nil, err
			}
			*st = tx.Stmt(s)
			bound[q] = *st
		}
		return *st, nil
	}
	last := lastPuts(changes)
	for ci, c := range changes {
		for ai, a := range c.PutInodes {
			if last[a.Ino] != (slot{ci, ai}) {
				continue
			}
			st, err := prep(&putInode, sqlPutInode)
			if err != nil {
				return err
			}
			if _, err := st.Exec(int64(a.Ino), int(a.Type), int64(a.Mode), a.User, a.Group, a.Size, int64(a.Nlink), a.Mtime, a.Ctime, int(a.Rep), int64(a.Seq), a.Target); err != nil {
				return fmt.Errorf("write inode %d: %w", a.Ino, err)
			}
		}
		for _, ino := range c.DelInodes {
			st, err := prep(&delInode, sqlDelInode)
			if err != nil {
				return err
			}
			if _, err := st.Exec(int64(ino)); err != nil {
				return fmt.Errorf("delete inode %d: %w", ino, err)
			}
			if c.Blocks == nil || c.Blocks[ino] == nil {
				st, err := prep(&delExt, sqlDelExtents)
				if err != nil {
					return err
				}
				if _, err := st.Exec(int64(ino)); err != nil {
					return fmt.Errorf("delete blocks of inode %d: %w", ino, err)
				}
			}
		}
		for _, k := range c.DelEntries {
			st, err := prep(&delName, sqlDelName)
			if err != nil {
				return err
			}
			if _, err := st.Exec(int64(k.Parent), k.Name); err != nil {
				return fmt.Errorf("delete entry %q in %d: %w", k.Name, k.Parent, err)
			}
		}
		for _, e := range c.PutEntries {
			st, err := prep(&putName, sqlPutName)
			if err != nil {
				return err
			}
			if _, err := st.Exec(int64(e.Parent), e.Name, int64(e.Ino)); err != nil {
				return fmt.Errorf("write entry %q in %d: %w", e.Name, e.Parent, err)
			}
		}
		for ino, xs := range c.Blocks {
			st, err := prep(&delExt, sqlDelExtents)
			if err != nil {
				return err
			}
			if _, err := st.Exec(int64(ino)); err != nil {
				return fmt.Errorf("replace blocks of inode %d: %w", ino, err)
			}
			for _, x := range xs {
				st, err := prep(&putExt, sqlPutExtent)
				if err != nil {
					return err
				}
				reps := make([]byte, 0, 12*len(x.Replicas))
				for _, r := range x.Replicas {
					reps = binary.LittleEndian.AppendUint32(reps, r.Node)
					reps = binary.LittleEndian.AppendUint64(reps, r.Start)
				}
				crcs := make([]byte, 0, 4*len(x.CRC))
				for _, c := range x.CRC {
					crcs = binary.LittleEndian.AppendUint32(crcs, c)
				}
				if _, err := st.Exec(int64(ino), int64(x.Index), int64(x.Count), reps, crcs); err != nil {
					return fmt.Errorf("write blocks of inode %d: %w", ino, err)
				}
			}
		}
		for _, d := range c.PutNodes {
			st, err := prep(&putNode, sqlPutNode)
			if err != nil {
				return err
			}
			if _, err := st.Exec(int64(d.ID), d.Identity, int64(d.Blocks), d.Enabled); err != nil {
				return fmt.Errorf("write datanode %s: %w", d.Identity, err)
			}
		}
		for ino, mt := range c.Touch {
			st, err := prep(&touch, sqlTouch)
			if err != nil {
				return err
			}
			if _, err := st.Exec(int64(ino), mt); err != nil {
				return fmt.Errorf("touch directory %d: %w", ino, err)
			}
		}
		if c.InoLimit != 0 {
			if _, err := tx.Exec(`INSERT INTO counters VALUES ('ino_limit', $1) ON CONFLICT (name) DO UPDATE SET value=excluded.value WHERE excluded.value > counters.value`, int64(c.InoLimit)); err != nil {
				return fmt.Errorf("write inode limit: %w", err)
			}
		}
	}
	return nil
}

// Close implements Store.
func (s *SQLite) Close() error {
	for _, st := range s.stmts {
		st.Close()
	}
	return s.db.Close()
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

// Sync implements Syncer: a checkpoint fsyncs the WAL (and then the
// database file), which at synchronous=NORMAL is the point where relaxed
// commits become durable.
func (s *SQLite) Sync() error {
	var busy, logFrames, done int
	if err := s.db.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logFrames, &done); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
