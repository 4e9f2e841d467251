package namenode

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// raftStore keeps a group member's Raft stable state (term, vote) in a
// bbolt file: hashicorp/raft's StableStore. Every write is one bbolt
// transaction, durable when it returns (bbolt fdatasyncs at commit), which
// is what Raft requires before a member acknowledges a vote. The log is
// in raft.log (raftlog.go); members of the first version kept it here, in
// the log bucket, keyed by index (big-endian), which openRaftLogs moves
// out.
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

// A record of the first version's log bucket: term u64, type u8,
// appended-at Unix ns i64, data (raftlog.go's entry payload).
const raftRecordHeader = 17

// eachLog calls fn with every entry of the log bucket, in index order:
// members of the first version kept their log there (openRaftLogs moves
// it to raft.log).
func (s *raftStore) eachLog(fn func(*raft.Log)) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(raftLogBucket).ForEach(func(k, v []byte) error {
			if len(k) != 8 || len(v) < raftRecordHeader {
				return fmt.Errorf("raft log entry %x: %d bytes, shorter than its header", k, len(v))
			}
			fn(&raft.Log{Index: binary.BigEndian.Uint64(k), Term: binary.BigEndian.Uint64(v), Type: raft.LogType(v[8]),
				AppendedAt: time.Unix(0, int64(binary.BigEndian.Uint64(v[9:]))), Data: v[raftRecordHeader:]})
			return nil
		})
	})
}

// dropLogs empties the log bucket once its entries are in raft.log.
func (s *raftStore) dropLogs() error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(raftLogBucket); err != nil {
			return err
		}
		_, err := tx.CreateBucket(raftLogBucket)
		return err
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
