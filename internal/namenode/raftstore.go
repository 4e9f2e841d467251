package namenode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// raftStore keeps a group member's Raft log and its stable state (term,
// vote) in one bbolt file: hashicorp/raft's LogStore and StableStore.
// Every write is one bbolt transaction, durable when it returns (bbolt
// fdatasyncs at commit), which is what Raft requires before a member
// acknowledges an entry or a vote. (raft-boltdb, the library's own
// store, does the same but needs an older go-metrics than raft v1.8.)
//
// A log record is the entry's term, type, append time and data, keyed by
// its index (big-endian, so keys sort by index).
type raftStore struct {
	db *bolt.DB
}

var (
	raftLogBucket    = []byte("log")
	raftStableBucket = []byte("stable")
)

func openRaftStore(path string) (*raftStore, error) {
	// The free list is not written at each commit (rebuilt at open) and
	// the map is large enough from the start that appends rarely remap it.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true,
		FreelistType: bolt.FreelistMapType, InitialMmapSize: 256 << 20})
	if err != nil {
		return nil, fmt.Errorf("raft log %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(raftLogBucket); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(raftStableBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("raft log %s: %w", path, err)
	}
	return &raftStore{db: db}, nil
}

func (s *raftStore) Close() error { return s.db.Close() }

func indexKey(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

func (s *raftStore) FirstIndex() (uint64, error) {
	var i uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(raftLogBucket).Cursor().First(); k != nil {
			i = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return i, err
}

func (s *raftStore) LastIndex() (uint64, error) {
	var i uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(raftLogBucket).Cursor().Last(); k != nil {
			i = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return i, err
}

// A record: term u64, type u8, appended-at Unix ns i64, data.
const raftRecordHeader = 17

func (s *raftStore) GetLog(index uint64, l *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(raftLogBucket).Get(indexKey(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		if len(v) < raftRecordHeader {
			return fmt.Errorf("raft log entry %d: %d bytes, shorter than its header", index, len(v))
		}
		l.Index = index
		l.Term = binary.BigEndian.Uint64(v)
		l.Type = raft.LogType(v[8])
		l.AppendedAt = time.Unix(0, int64(binary.BigEndian.Uint64(v[9:])))
		l.Data = append([]byte(nil), v[raftRecordHeader:]...) // v lives only during the transaction
		l.Extensions = nil
		return nil
	})
}

func (s *raftStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *raftStore) StoreLogs(logs []*raft.Log) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(raftLogBucket)
		for _, l := range logs {
			if len(l.Extensions) > 0 {
				return errors.New("raft log entries with extensions are not stored")
			}
			v := make([]byte, raftRecordHeader, raftRecordHeader+len(l.Data))
			binary.BigEndian.PutUint64(v, l.Term)
			v[8] = byte(l.Type)
			binary.BigEndian.PutUint64(v[9:], uint64(l.AppendedAt.UnixNano()))
			if err := b.Put(indexKey(l.Index), append(v, l.Data...)); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *raftStore) DeleteRange(lo, hi uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		// Keys are collected first: deleting under a cursor skips keys.
		b := tx.Bucket(raftLogBucket)
		var keys [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(indexKey(lo)); k != nil && binary.BigEndian.Uint64(k) <= hi; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *raftStore) Set(key, val []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(raftStableBucket).Put(key, val)
	})
}

func (s *raftStore) Get(key []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(raftStableBucket).Get(key); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	return out, err
}

func (s *raftStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (s *raftStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil || len(v) == 0 {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raft stable value %q: %d bytes, not 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
