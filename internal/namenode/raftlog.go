package namenode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/commitlog"
)

// raftLog is a group member's Raft log (hashicorp/raft's LogStore): one
// append-only file of commitlog records, the record's sequence number
// being the entry's index and its payload the entry (term u64, type u8,
// appended-at Unix ns i64, data), with the records' offsets in memory.
// StoreLogs writes a batch of entries with one write and one fdatasync
// (bbolt, the previous store, synced twice per batch: data, then meta
// page).
//
// Crash safety: the valid log is the chain of intact records with
// consecutive indexes from the file's start, as for the commit log; Open
// cuts the file after it (a torn batch) and zeroes the room after it
// again, durably, so what lies past the end of the log is always zeros
// or never-synced records: a later, shorter write can never be followed
// by a stale record that chains on. Deleting a suffix (Raft's conflict
// truncation) zeroes it durably for the same reason. Deleting a prefix (compaction
// after a snapshot) is in memory until the dead prefix is large, then the
// live records are rewritten into a new file renamed over the old one:
// a prefix that reappears after a restart holds only committed entries,
// identical on every member, which Raft tolerates.
type raftLog struct {
	path string
	// compactAt is the dead prefix past which DeleteRange rewrites the
	// file (raftLogCompactAt; smaller in tests).
	compactAt int64

	wmu sync.Mutex // serialises writers (StoreLogs, DeleteRange) across their syncs

	mu    sync.RWMutex // guards the fields below; readers hold it shared
	f     *os.File
	first uint64  // index of offs[0]; 0 when empty
	offs  []int64 // offs[i]: offset of entry first+i's record
	end   int64   // end of the last record
	size  int64   // the file's size: zeros from end on (wmu)
	buf   []byte  // StoreLogs' write buffer (wmu)
}

// raftEntryHeader is the entry's term, type and append time before its data.
const raftEntryHeader = 17

// raftLogCompactAt is the dead prefix past which DeleteRange rewrites the file.
const raftLogCompactAt = 64 << 20

// raftLogGrowth is how much zeroed room the file gets at a time: an
// fdatasync of a write within the file's size syncs only the data, one
// that extends the file commits the file system's journal too (about
// twice the cost here), so appends go into preallocated zeros, as in the
// commit log.
const raftLogGrowth = 16 << 20

func openRaftLog(path string) (*raftLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	l := &raftLog{path: path, f: f, compactAt: raftLogCompactAt}
	if err := l.scan(); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// scan finds the valid chain and cuts the file after it.
func (l *raftLog) scan() error {
	st, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("raft log %s: %w", l.path, err)
	}
	size := st.Size()
	var hdr [commitlog.HeaderLen]byte
	var off int64
	var payload []byte
	for off+commitlog.HeaderLen <= size {
		if _, err := l.f.ReadAt(hdr[:], off); err != nil {
			return fmt.Errorf("raft log %s: read at %d: %w", l.path, off, err)
		}
		n, sum, seq := commitlog.ParseHeader(hdr[:])
		if n < raftEntryHeader || n > commitlog.MaxRecord || off+commitlog.HeaderLen+int64(n) > size ||
			(l.first != 0 && seq != l.first+uint64(len(l.offs))) || seq == 0 {
			break
		}
		payload = append(payload[:0], make([]byte, n)...)
		if _, err := l.f.ReadAt(payload, off+commitlog.HeaderLen); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("raft log %s: read at %d: %w", l.path, off, err)
		}
		if !commitlog.Intact(seq, payload, sum) {
			break
		}
		if l.first == 0 {
			l.first = seq
		}
		l.offs = append(l.offs, off)
		off += commitlog.HeaderLen + int64(n)
	}
	l.end = off
	// Whatever follows may be a torn batch: cut, then zeroed room again
	// (synced by grow).
	if err := l.f.Truncate(off); err != nil {
		return fmt.Errorf("raft log %s: cut the torn tail at %d: %w", l.path, off, err)
	}
	l.size = off
	return l.grow(off)
}

// grow extends the file with zeros past need, synced (the size too).
// wmu held, or at open.
func (l *raftLog) grow(need int64) error {
	size := (need/raftLogGrowth + 1) * raftLogGrowth
	if err := writeZeros(l.f, l.size, size); err != nil {
		return fmt.Errorf("raft log %s: preallocate: %w", l.path, err)
	}
	if err := unix.Fsync(int(l.f.Fd())); err != nil {
		return fmt.Errorf("raft log %s: %w", l.path, err)
	}
	l.size = size
	return nil
}

// writeZeros writes zeros over [from, to) of f (not fallocate: writes into
// unwritten extents make every fdatasync update metadata too).
func writeZeros(f *os.File, from, to int64) error {
	zeros := make([]byte, min(to-from, 1<<20))
	for from < to {
		n := min(int64(len(zeros)), to-from)
		if _, err := f.WriteAt(zeros[:n], from); err != nil {
			return err
		}
		from += n
	}
	return nil
}

func (l *raftLog) Close() error { return l.f.Close() }

// last is the last index held (0 when empty); mu held.
func (l *raftLog) last() uint64 {
	if len(l.offs) == 0 {
		return 0
	}
	return l.first + uint64(len(l.offs)) - 1
}

func (l *raftLog) FirstIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.offs) == 0 {
		return 0, nil
	}
	return l.first, nil
}

func (l *raftLog) LastIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.last(), nil
}

func (l *raftLog) GetLog(index uint64, out *raft.Log) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.offs) == 0 || index < l.first || index > l.last() {
		return raft.ErrLogNotFound
	}
	i := index - l.first
	off, end := l.offs[i], l.end
	if int(i)+1 < len(l.offs) {
		end = l.offs[i+1]
	}
	rec := make([]byte, end-off)
	if _, err := l.f.ReadAt(rec, off); err != nil {
		return fmt.Errorf("raft log %s: entry %d at %d: %w", l.path, index, off, err)
	}
	v := rec[commitlog.HeaderLen:]
	out.Index = index
	out.Term = binary.BigEndian.Uint64(v)
	out.Type = raft.LogType(v[8])
	out.AppendedAt = time.Unix(0, int64(binary.BigEndian.Uint64(v[9:])))
	out.Data = v[raftEntryHeader:]
	out.Extensions = nil
	return nil
}

func (l *raftLog) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

// StoreLogs appends entries that follow the last one, durably.
func (l *raftLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.RLock()
	next, start := l.last()+1, l.end
	if len(l.offs) == 0 {
		next = logs[0].Index
	}
	l.mu.RUnlock()
	b := l.buf[:0]
	offs := make([]int64, 0, len(logs))
	var entry []byte
	for i, e := range logs {
		if e.Index != next+uint64(i) {
			return fmt.Errorf("raft log %s: entry %d stored after %d: not the next one", l.path, e.Index, next+uint64(i)-1)
		}
		if len(e.Extensions) > 0 {
			return errors.New("raft log entries with extensions are not stored")
		}
		entry = binary.BigEndian.AppendUint64(entry[:0], e.Term)
		entry = append(entry, byte(e.Type))
		entry = binary.BigEndian.AppendUint64(entry, uint64(e.AppendedAt.UnixNano()))
		entry = append(entry, e.Data...)
		offs = append(offs, start+int64(len(b)))
		b = commitlog.AppendRecord(b, e.Index, entry)
	}
	if cap(b) <= 4<<20 {
		l.buf = b
	}
	if start+int64(len(b)) > l.size {
		if err := l.grow(start + int64(len(b))); err != nil {
			return err
		}
	}
	if _, err := l.f.WriteAt(b, start); err != nil {
		return fmt.Errorf("raft log %s: write: %w", l.path, err)
	}
	if err := unix.Fdatasync(int(l.f.Fd())); err != nil {
		return fmt.Errorf("raft log %s: sync: %w", l.path, err)
	}
	l.mu.Lock()
	if len(l.offs) == 0 {
		l.first = next
	}
	l.offs = append(l.offs, offs...)
	l.end = start + int64(len(b))
	l.mu.Unlock()
	return nil
}

// DeleteRange deletes the entries lo..hi: a prefix (compaction), a suffix
// (conflicting entries) or all of them.
func (l *raftLog) DeleteRange(lo, hi uint64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.RLock()
	first, last := l.first, l.last()
	l.mu.RUnlock()
	if len(l.offs) == 0 || hi < first || lo > last || hi < lo {
		return nil
	}
	switch {
	case lo <= first && hi >= last:
		return l.rewrite(last + 1)
	case lo <= first:
		l.mu.Lock()
		l.offs = l.offs[hi+1-first:]
		l.first = hi + 1
		dead := l.offs[0]
		l.mu.Unlock()
		if dead >= l.compactAt && dead >= l.end/2 {
			return l.rewrite(hi + 1)
		}
		return nil
	case hi >= last:
		l.mu.RLock()
		cut := l.offs[lo-first]
		l.mu.RUnlock()
		// Zeroed durably, so no stale record chains on after later appends.
		if err := writeZeros(l.f, cut, l.end); err != nil {
			return fmt.Errorf("raft log %s: delete entries %d-%d: %w", l.path, lo, hi, err)
		}
		if err := unix.Fdatasync(int(l.f.Fd())); err != nil {
			return fmt.Errorf("raft log %s: sync: %w", l.path, err)
		}
		l.mu.Lock()
		l.offs = l.offs[:lo-first]
		l.end = cut
		l.mu.Unlock()
		return nil
	default:
		return fmt.Errorf("raft log %s: delete entries %d-%d from the middle of %d-%d: not supported", l.path, lo, hi, first, last)
	}
}

// rewrite replaces the file by one holding the entries from index from
// on, through a new file renamed over it. wmu held.
func (l *raftLog) rewrite(from uint64) error {
	l.mu.RLock()
	start := l.end
	var keep []int64
	if from <= l.last() {
		keep = l.offs[from-l.first:]
		start = keep[0]
	}
	data := make([]byte, l.end-start)
	_, err := l.f.ReadAt(data, start)
	l.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("raft log %s: compact: %w", l.path, err)
	}
	if err := writeFileSynced(l.path, data); err != nil {
		return fmt.Errorf("raft log %s: compact: %w", l.path, err)
	}
	f, err := os.OpenFile(l.path, os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("raft log %s: %w", l.path, err)
	}
	// Room after the records, zeroed before the file is in use.
	fresh := &raftLog{path: l.path, f: f, size: int64(len(data))}
	if err := fresh.grow(fresh.size); err != nil {
		f.Close()
		return err
	}
	offs := make([]int64, len(keep))
	for i, o := range keep {
		offs[i] = o - start
	}
	l.mu.Lock()
	old := l.f
	l.f, l.offs, l.end, l.size = f, offs, int64(len(data)), fresh.size
	if len(offs) == 0 {
		l.first = 0
	} else {
		l.first = from
	}
	l.mu.Unlock()
	return old.Close()
}

// raftLogFile is the log's file name in the member's directory.
const raftLogFile = "raft.log"

// errRaftLogLost: raft.log is gone although the member kept its log there
// (OpenGroup says how the member comes back).
var errRaftLogLost = errors.New("this member's Raft log is gone")

// raftLogMoved marks, in the stable store, that the log lives in
// raft.log (not in raft.db's log bucket, where members of the first
// version kept it): raft.log missing after that is a lost log.
var raftLogMoved = []byte("log-in-raft.log")

// openRaftLogs opens a member's Raft log, moving it out of raft.db's log
// bucket first if an earlier version kept it there.
func openRaftLogs(dir string, stable *raftStore) (*raftLog, error) {
	path := filepath.Join(dir, raftLogFile)
	moved, err := stable.Get(raftLogMoved)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if len(moved) > 0 {
			return nil, fmt.Errorf("%s: %w", path, errRaftLogLost)
		}
		var data []byte
		var entry []byte
		err := stable.eachLog(func(e *raft.Log) {
			entry = binary.BigEndian.AppendUint64(entry[:0], e.Term)
			entry = append(entry, byte(e.Type))
			entry = binary.BigEndian.AppendUint64(entry, uint64(e.AppendedAt.UnixNano()))
			entry = append(entry, e.Data...)
			data = commitlog.AppendRecord(data, e.Index, entry)
		})
		if err != nil {
			return nil, fmt.Errorf("raft log: move it out of raft.db: %w", err)
		}
		if err := writeFileSynced(path, data); err != nil {
			return nil, fmt.Errorf("raft log %s: %w", path, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	if len(moved) == 0 {
		if err := stable.Set(raftLogMoved, []byte{1}); err != nil {
			return nil, err
		}
		if err := stable.dropLogs(); err != nil {
			return nil, err
		}
	}
	return openRaftLog(path)
}
