package meta

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// A member of a namenode group that is new, or too far behind for the
// group's log, is seeded by the leader with a copy of its store: the
// leader makes the copy with BackupAt (which also says how far the copy
// holds the group's log), the member replaces its own store's content
// with it through Reseed.

// Seeder is a store that can make a copy of itself to seed another.
type Seeder interface {
	// BackupAt is Backup, also returning the commit-log position the
	// copy holds (the copy itself records none).
	BackupAt(dst string) (logSeq uint64, err error)
}

// Reseeder is a store whose whole content can be replaced by a copy.
type Reseeder interface {
	// Reseed replaces everything the store holds, its namespace
	// included, with what src holds, and records that it holds the
	// commit log through logSeq. Nothing else may use the store
	// meanwhile.
	Reseed(ctx context.Context, src Store, logSeq uint64) error
}

// BackupAt implements Seeder.
func (s *SQLite) BackupAt(dst string) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var seq int64
	if err := s.db.QueryRow(`SELECT value FROM counters WHERE name = 'log_seq'`).Scan(&seq); err != nil && err != sql.ErrNoRows {
		return 0, fmt.Errorf("backup: log position: %w", err)
	}
	if err := s.backupLocked(dst); err != nil {
		return 0, err
	}
	return uint64(seq), nil
}

// Reseed implements Reseeder.
func (s *SQLite) Reseed(ctx context.Context, src Store, logSeq uint64) error {
	return reseed(ctx, src, s, s.db, &s.mu, &s.namespace, logSeq)
}

// Reseed implements Reseeder.
func (s *Postgres) Reseed(ctx context.Context, src Store, logSeq uint64) error {
	return reseed(ctx, src, s, s.db, &s.mu, &s.namespace, logSeq)
}

// reseed copies src into dst (Copy: one transaction, then compared), then
// sets dst's log position exactly (Copy leaves it: it is the database's
// own) and reloads its namespace id. A crash between the two leaves the
// old, lower position with the new content: the caller seeds again.
func reseed(ctx context.Context, src, dst Store, db *sql.DB, mu *sync.Mutex, namespace *string, logSeq uint64) error {
	if _, err := Copy(ctx, src, dst); err != nil {
		return fmt.Errorf("reseed the store: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, err := db.ExecContext(ctx, `INSERT INTO counters VALUES ('log_seq', $1) ON CONFLICT (name) DO UPDATE SET value = excluded.value`, int64(logSeq)); err != nil {
		return fmt.Errorf("reseed the store: record its log position: %w", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT id FROM namespace`).Scan(namespace); err != nil {
		return fmt.Errorf("reseed the store: namespace id: %w", err)
	}
	return nil
}
