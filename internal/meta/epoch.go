package meta

import (
	"database/sql"
	"errors"
	"fmt"
)

// BootEpocher is a store that keeps the namenode's boot epoch: a durable
// counter the namenode raises once at every start, before it serves, so
// that what it numbers per boot (block generations, see auth.Ticket) only
// grows across restarts.
type BootEpocher interface {
	// RaiseBootEpoch sets the boot epoch to the larger of its stored value
	// plus one and floor, makes it durable, and returns it.
	RaiseBootEpoch(floor uint64) (uint64, error)
}

// RaiseBootEpoch implements BootEpocher (the counters row 'boot_epoch').
func (s *SQLite) RaiseBootEpoch(floor uint64) (uint64, error) {
	if s.readOnly {
		return 0, errors.New("boot epoch: metadata db opened read-only")
	}
	e, err := s.raiseBootEpoch(floor)
	if err != nil {
		return 0, fmt.Errorf("metadata db %s: boot epoch: %w", s.path, err)
	}
	// Written at synchronous=NORMAL: durable once the WAL is synced.
	if err := s.Sync(); err != nil {
		return 0, err
	}
	return e, nil
}

func (s *SQLite) raiseBootEpoch(floor uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return raiseBootEpoch(s.db, floor)
}

// raiseBootEpoch raises the counter with SQL both engines share.
func raiseBootEpoch(db *sql.DB, floor uint64) (uint64, error) {
	tx, err := db.Begin()
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var v int64
	if err := tx.QueryRow(`SELECT value FROM counters WHERE name = 'boot_epoch'`).Scan(&v); err != nil && err != sql.ErrNoRows {
		return 0, err
	}
	if v < 0 {
		return 0, fmt.Errorf("stored boot epoch %d is negative", v)
	}
	e := max(uint64(v)+1, floor)
	if _, err := tx.Exec(`INSERT INTO counters VALUES ('boot_epoch', $1) ON CONFLICT (name) DO UPDATE SET value=excluded.value`, int64(e)); err != nil {
		return 0, err
	}
	return e, tx.Commit()
}
