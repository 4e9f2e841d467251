package namenode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/plasmafs/plasma/internal/commitlog"
	"github.com/plasmafs/plasma/internal/meta"
)

// The commit log is the durability point when Config.LogPath is set: the
// committer appends each batch as one record and fdatasyncs the log for
// durable commits; the checkpointer applies logged batches to the store in
// the background, in larger transactions, recording how far it got
// (meta.Change.LogSeq). Start-up replays what the store lacks. Once the
// log holds more than LogSize, the committer's sync waits for the
// checkpointer, makes the store durable and starts the log over. The
// checkpointer (checkpointer.go) owns the open log.

const defaultLogSize = 64 << 20

// openLog opens the commit log and brings the store up to date with it
// before anything is loaded into memory.
//
// journaled receives the journaled writes of every record the log holds,
// in order, also those already in the store (journal.go); nil: not wanted.
func openLog(cfg Config, snap *meta.Snapshot, journaled func([]meta.JournalWrite)) (*commitlog.Log, *meta.Snapshot, error) {
	size := cfg.LogSize
	if size == 0 {
		size = defaultLogSize
	}
	if _, err := os.Stat(cfg.LogPath); errors.Is(err, fs.ErrNotExist) && snap.LogSeq > 0 {
		return nil, nil, fmt.Errorf("commit log %s is missing but the store was written from it (through record %d): the most recent commits may be lost; restore the log, or move the database aside and restore a backup", cfg.LogPath, snap.LogSeq)
	}
	replayed := 0
	last := snap.LogSeq
	l, err := commitlog.Open(cfg.LogPath, size, snap.LogSeq+1, func(seq uint64, payload []byte) error {
		if journaled != nil && meta.HoldsJournal(payload) {
			changes, err := meta.DecodeChanges(payload)
			if err != nil {
				return err
			}
			for _, c := range changes {
				journaled(c.Journal)
			}
		}
		if seq <= snap.LogSeq {
			return nil // already in the store
		}
		// Errors name the log, the record and its offset (commitlog.Open).
		if seq != last+1 {
			return fmt.Errorf("the log does not continue the store (the store ends at record %d): a database restored from a backup needs its old log removed", last)
		}
		changes, err := meta.DecodeChanges(payload)
		if err != nil {
			return err
		}
		if err := cfg.Store.Apply(context.Background(), append(changes, &meta.Change{LogSeq: seq})); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		replayed++
		last = seq
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// The store must hold durably what the log will no longer: a log
	// that starts over relies on it.
	if err := cfg.Store.(meta.Syncer).Sync(); err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("sync the store after replaying the commit log: %w", err)
	}
	if replayed > 0 {
		cfg.Logger.Info("commit log replayed", "records", replayed, "through", last)
		if snap, err = cfg.Store.Load(context.Background()); err != nil {
			l.Close()
			return nil, nil, err
		}
	}
	return l, snap, nil
}

// ReplayLog brings a stopped namenode's store up to date with its commit
// log (an offline backup needs it).
func ReplayLog(store meta.Store, path string) error {
	snap, err := store.Load(context.Background())
	if err != nil {
		return err
	}
	l, _, err := openLog(Config{Store: store, LogPath: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, snap, nil)
	if err != nil {
		return err
	}
	return l.Close()
}

// waitCheckpoint waits until the store holds every logged batch (a backup
// needs it); without a log the store holds everything applied.
func (n *Namenode) waitCheckpoint() error {
	if n.cfg.Group != nil {
		return n.cfg.Group.WaitStore()
	}
	if n.ckpt == nil {
		return nil
	}
	return n.ckpt.waitAll()
}
