package meta

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgMigrations are migrations translated for PostgreSQL: the same tables,
// columns and order (schema_version counts both lists alike), with
// PostgreSQL's types (BIGINT for every number the namenode stores as a
// 64-bit integer, BYTEA for blobs, BOOLEAN for flags).
var pgMigrations = []string{
	`CREATE TABLE inodes (
		ino BIGINT PRIMARY KEY, type SMALLINT NOT NULL, mode BIGINT NOT NULL,
		owner TEXT NOT NULL, grp TEXT NOT NULL, size BIGINT NOT NULL, nlink BIGINT NOT NULL,
		mtime BIGINT NOT NULL, ctime BIGINT NOT NULL, rep SMALLINT NOT NULL, seq BIGINT NOT NULL,
		target TEXT NOT NULL);
	CREATE TABLE names (parent BIGINT NOT NULL, name TEXT NOT NULL, ino BIGINT NOT NULL,
		PRIMARY KEY (parent, name));
	CREATE TABLE extents (ino BIGINT NOT NULL, idx BIGINT NOT NULL, count BIGINT NOT NULL,
		replicas BYTEA NOT NULL, crcs BYTEA NOT NULL, PRIMARY KEY (ino, idx));
	CREATE TABLE datanodes (id BIGINT PRIMARY KEY, identity TEXT NOT NULL UNIQUE,
		blocks BIGINT NOT NULL, enabled BOOLEAN NOT NULL);
	CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL);`,
	`CREATE TABLE namespace (id TEXT NOT NULL);`,
	`ALTER TABLE extents ADD COLUMN gen BIGINT NOT NULL DEFAULT 0;`,
	pgViews,
	`ALTER TABLE datanodes ADD COLUMN draining BOOLEAN NOT NULL DEFAULT false;
	CREATE TABLE removed_datanodes (id BIGINT PRIMARY KEY, identity TEXT NOT NULL UNIQUE);`,
}

// pgTables are the tables the namenode writes: its role must be allowed to.
var pgTables = []string{"inodes", "names", "extents", "datanodes", "counters", "removed_datanodes"}

// Postgres is a metadata store in a PostgreSQL database, one database per
// namenode. Apply sends a batch's statements in one round trip (a pgx
// batch) inside one transaction, committed synchronously: the namenode's
// commit log is the durability point and the store a checkpoint, so this
// latency is the checkpointer's, never a commit's.
type Postgres struct {
	mu        sync.Mutex // serialises Apply, RaiseBootEpoch and Close
	db        *sql.DB    // through pgx's database/sql driver: one connection
	where     string     // the URL without its password, for messages
	namespace string
}

func init() {
	open := func(ctx context.Context, u *url.URL, o OpenOptions) (Store, error) {
		return OpenPostgres(ctx, u.String(), o)
	}
	Register("postgres", open)
	Register("postgresql", open)
}

// ErrUnavailable marks a store error that left the store as it was, or
// holding the batch in full (a connection lost, the server restarting):
// applying the same batch again is safe (Apply is idempotent) and may
// succeed later. Any other Apply error leaves the store's state unknown.
var ErrUnavailable = errors.New("metadata store unavailable")

// OpenPostgres opens the PostgreSQL database a postgres:// URL names, as
// o says: Format or Create make a new namespace in a database holding no
// tables; Upgrade migrates an older schema (otherwise refused, so that an
// operator upgrades a shared database deliberately, after a pg_dump).
func OpenPostgres(ctx context.Context, location string, o OpenOptions) (*Postgres, error) {
	cfg, err := pgx.ParseConfig(location)
	if err != nil {
		return nil, fmt.Errorf("metadata store: %w", err)
	}
	if cfg.ConnectTimeout == 0 {
		// A server that does not answer is retried by the checkpointer;
		// a connection attempt must not hang meanwhile.
		cfg.ConnectTimeout = 10 * time.Second
	}
	where := location
	if u, err := url.Parse(location); err == nil {
		where = u.Redacted()
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(1)
	s := &Postgres{db: db, where: where}
	if err := s.open(ctx, o); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Postgres) errorf(format string, args ...any) error {
	return fmt.Errorf("metadata store %s: "+format, append([]any{s.where}, args...)...)
}

// open checks the database (reachable, writable, a namespace of this
// schema version) and creates a namespace in it when asked to.
func (s *Postgres) open(ctx context.Context, o OpenOptions) error {
	if err := s.db.PingContext(ctx); err != nil {
		return s.errorf("cannot reach PostgreSQL: %w (is the server running, and do the URL's host, port, user and database exist?)", err)
	}
	var readOnly string
	if err := s.db.QueryRowContext(ctx, `SELECT current_setting('transaction_read_only')`).Scan(&readOnly); err != nil {
		return s.errorf("%w", err)
	}
	if readOnly == "on" && !o.ReadOnly {
		return s.errorf("the database is read-only (a standby, or default_transaction_read_only is on): the namenode must write its metadata; name the primary, or a database the role may write")
	}
	var fresh bool
	if err := s.db.QueryRowContext(ctx, `SELECT to_regclass('schema_version') IS NULL`).Scan(&fresh); err != nil {
		return s.errorf("%w", err)
	}
	create := (o.Format || o.Create) && !o.ReadOnly
	switch {
	case fresh && !create:
		return fmt.Errorf("%w: %s holds no PlasmaFS namespace; start the namenode with -format to create one", ErrNoDatabase, s.where)
	case !fresh && o.Format:
		return s.errorf("the database already holds a namespace: -format creates a new namespace only in a database without one (drop and create the database first, knowing that its files are lost)")
	}
	if fresh {
		if err := s.migrate(ctx, 0); err != nil {
			return s.errorf("create the namespace: %w (the role needs CREATE on the database's schema)", err)
		}
	}
	var v int
	if err := s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); err != nil {
		return s.errorf("schema version: %w", err)
	}
	switch {
	case v > len(pgMigrations):
		return s.errorf("schema version %d is newer than this program's (%d): upgrade plasma", v, len(pgMigrations))
	case v < len(pgMigrations) && !o.Upgrade:
		return s.errorf("schema version %d is older than this program's: back the database up (pg_dump), then start the namenode once with -upgrade to migrate it to version %d", v, len(pgMigrations))
	case v < len(pgMigrations):
		if err := s.migrate(ctx, v); err != nil {
			return s.errorf("upgrade the schema from version %d: %w", v, err)
		}
	}
	if !o.ReadOnly {
		if err := s.checkWritable(ctx); err != nil {
			return err
		}
	}
	if err := s.db.QueryRowContext(ctx, `SELECT id FROM namespace`).Scan(&s.namespace); err != nil {
		return s.errorf("namespace id: %w", err)
	}
	return nil
}

// checkWritable refuses a role that may not write every table: better at
// start than at the first checkpoint, with commits already acknowledged.
func (s *Postgres) checkWritable(ctx context.Context) error {
	var role string
	if err := s.db.QueryRowContext(ctx, `SELECT current_user`).Scan(&role); err != nil {
		return s.errorf("%w", err)
	}
	for _, t := range pgTables {
		var ok bool
		// has_table_privilege with a list is true if any one is held.
		err := s.db.QueryRowContext(ctx, `SELECT has_table_privilege($1, 'INSERT') AND has_table_privilege($1, 'UPDATE')
			AND has_table_privilege($1, 'DELETE') AND has_table_privilege($1, 'SELECT')`, t).Scan(&ok)
		if err != nil {
			return s.errorf("privileges on %s: %w", t, err)
		}
		if !ok {
			return s.errorf("role %q may not write table %s: the namenode writes every table; grant it SELECT, INSERT, UPDATE and DELETE on all of them, or use the role that owns them", role, t)
		}
	}
	return nil
}

// migrate runs the migrations after version from, each in its own
// transaction with its schema_version update.
func (s *Postgres) migrate(ctx context.Context, from int) error {
	if from == 0 {
		if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
			return err
		}
		if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_version SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM schema_version)`); err != nil {
			return err
		}
	}
	for v := from; v < len(pgMigrations); v++ {
		if err := s.migration(ctx, v); err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	return nil
}

func (s *Postgres) migration(ctx context.Context, v int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Two namenodes migrating at once: the second waits, then finds the
	// version moved and fails its UPDATE's check below.
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version FOR UPDATE`).Scan(&cur); err != nil {
		return err
	}
	if cur != v {
		return fmt.Errorf("schema version changed to %d meanwhile", cur)
	}
	if _, err := tx.ExecContext(ctx, pgMigrations[v]); err != nil {
		return err
	}
	switch v {
	case 0:
		now := time.Now().UnixNano()
		if _, err := tx.ExecContext(ctx, `INSERT INTO inodes VALUES (1, $1, 493, 'root', 'root', 0, 2, $2, $2, 0, 0, '')`, int(TypeDir), now); err != nil {
			return err
		}
	case 1:
		id := make([]byte, 16)
		if _, err := rand.Read(id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO namespace VALUES ($1)`, hex.EncodeToString(id)); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = $1`, v+1); err != nil {
		return err
	}
	return tx.Commit()
}

// Namespace implements Namespacer.
func (s *Postgres) Namespace() string { return s.namespace }

// Load implements Store.
func (s *Postgres) Load(ctx context.Context) (*Snapshot, error) {
	snap, err := loadSnapshot(ctx, s.db)
	if err != nil {
		return nil, s.errorf("%w", classify(err))
	}
	return snap, nil
}

// Apply implements Store: one transaction, its statements sent as one
// pgx batch. Errors of a lost connection wrap ErrUnavailable.
func (s *Postgres) Apply(ctx context.Context, changes []*Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &pgx.Batch{}
	queue := func(q string, args ...any) error {
		b.Queue(q, args...)
		return nil
	}
	if err := apply(changes, queue); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.errorf("%w", classify(err))
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		return pgx.BeginFunc(ctx, pc, func(tx pgx.Tx) error {
			return tx.SendBatch(ctx, b).Close()
		})
	})
	if err != nil {
		return s.errorf("apply %d changes: %w", len(changes), classify(err))
	}
	return nil
}

// Sync implements Syncer: every Apply commits synchronously (the store
// is the log's checkpoint, written in the background).
func (s *Postgres) Sync() error { return nil }

// RaiseBootEpoch implements BootEpocher.
func (s *Postgres) RaiseBootEpoch(floor uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := raiseBootEpoch(s.db, floor)
	if err != nil {
		return 0, s.errorf("boot epoch: %w", classify(err))
	}
	return e, nil
}

// Close implements Store.
func (s *Postgres) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.Close()
}
