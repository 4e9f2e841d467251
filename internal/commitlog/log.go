// Package commitlog is the namenode's durability point: an append-only,
// preallocated file of checksummed records with consecutive sequence
// numbers. A commit is durable once its record is written and the file
// fdatasynced; the SQL store is a checkpoint the records are applied to in
// the background, and the log starts over from its beginning once the
// store holds everything in it. This is the shape of HDFS's edit log and
// etcd's WAL.
//
// A record is
//
//	u32 payload length | u32 CRC32C of (seq, length, payload) | u64 seq | payload
//
// The valid log is the chain of records from offset 0 whose checksums
// hold and whose sequence numbers follow one another: a torn last record,
// zeros, or a stale record of an earlier cycle (its sequence number is
// lower) ends it.
package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

const headerLen = 16

// MaxRecord bounds one record's payload.
const MaxRecord = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Log is an open commit log. It is used by one goroutine at a time,
// except Sync, which may run while another goroutine appends.
type Log struct {
	f    *os.File
	path string
	off  int64  // end of the valid records
	next uint64 // sequence number of the next record
	size int64  // bytes preallocated (written with zeros)
	buf  []byte
}

// Open opens (creating, with prealloc bytes of zeros, if needed) the log at
// path and calls replay for every valid record in order; an error of
// replay ends Open, wrapped with the file, the record's sequence number and
// its offset. Appends continue after the last valid record, with sequence
// numbers from max(last+1, minNext).
func Open(path string, prealloc int64, minNext uint64, replay func(seq uint64, payload []byte) error) (*Log, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("commit log: %w", err)
	}
	l := &Log{f: f, path: path, next: minNext}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("commit log %s: %w", path, err)
	}
	l.size = st.Size()
	if err := l.scan(replay); err != nil {
		f.Close()
		return nil, err
	}
	if l.size < prealloc {
		if err := l.grow(prealloc); err != nil {
			f.Close()
			return nil, err
		}
	}
	return l, nil
}

// scan walks the valid chain from the start.
func (l *Log) scan(replay func(seq uint64, payload []byte) error) error {
	var hdr [headerLen]byte
	var off int64
	var expect uint64
	first := true
	for off+headerLen <= l.size {
		if _, err := l.f.ReadAt(hdr[:], off); err != nil {
			return fmt.Errorf("commit log %s: read at %d: %w", l.path, off, err)
		}
		n := binary.LittleEndian.Uint32(hdr[0:])
		sum := binary.LittleEndian.Uint32(hdr[4:])
		seq := binary.LittleEndian.Uint64(hdr[8:])
		if n == 0 && sum == 0 && seq == 0 {
			break // preallocated zeros
		}
		if n > MaxRecord || off+headerLen+int64(n) > l.size || (!first && seq != expect) {
			break
		}
		payload := make([]byte, n)
		if _, err := l.f.ReadAt(payload, off+headerLen); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("commit log %s: read at %d: %w", l.path, off, err)
		}
		if checksum(seq, payload) != sum {
			break // torn or stale
		}
		if err := replay(seq, payload); err != nil {
			return fmt.Errorf("commit log %s: record %d at offset %d: %w", l.path, seq, off, err)
		}
		first = false
		expect = seq + 1
		off += headerLen + int64(n)
	}
	l.off = off
	if !first && expect >= l.next {
		l.next = expect
	} else {
		// The caller holds records past this chain (minNext): the chain
		// is all behind it, so the log starts over rather than leave a
		// gap in the sequence that would end the chain at the next scan.
		l.off = 0
	}
	return nil
}

func checksum(seq uint64, payload []byte) uint32 {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[0:], seq)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(payload)))
	return crc32.Update(crc32.Checksum(b[:], castagnoli), castagnoli, payload)
}

// grow extends the preallocated file with zeros (not fallocate: writing
// into unwritten extents makes every fdatasync update metadata too).
func (l *Log) grow(size int64) error {
	zeros := make([]byte, 1<<20)
	for l.size < size {
		n := min(int64(len(zeros)), size-l.size)
		if _, err := l.f.WriteAt(zeros[:n], l.size); err != nil {
			return fmt.Errorf("commit log %s: preallocate: %w", l.path, err)
		}
		l.size += n
	}
	if err := unix.Fsync(int(l.f.Fd())); err != nil {
		return fmt.Errorf("commit log %s: %w", l.path, err)
	}
	return nil
}

// Append writes one record and returns its sequence number. It is not
// durable until Sync.
func (l *Log) Append(payload []byte) (uint64, error) {
	if len(payload) > MaxRecord {
		return 0, fmt.Errorf("commit log %s: record of %d bytes over the limit", l.path, len(payload))
	}
	need := l.off + headerLen + int64(len(payload))
	if need > l.size {
		if err := l.grow(max(2*l.size, need+(1<<20))); err != nil {
			return 0, err
		}
	}
	seq := l.next
	b := l.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, checksum(seq, payload))
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = append(b, payload...)
	if _, err := l.f.WriteAt(b, l.off); err != nil {
		return 0, fmt.Errorf("commit log %s: write: %w", l.path, err)
	}
	if cap(b) <= 1<<20 {
		l.buf = b
	}
	l.off = need
	l.next++
	return seq, nil
}

// Sync makes every record whose Append returned before it was called
// durable. It only fdatasyncs the file, so it may run while another
// goroutine appends (group commit: the next batch is written while the
// previous one is synced); a record appended meanwhile may or may not be
// covered, and a torn one ends the valid chain at the next Open.
func (l *Log) Sync() error {
	if err := unix.Fdatasync(int(l.f.Fd())); err != nil {
		return fmt.Errorf("commit log %s: sync: %w", l.path, err)
	}
	return nil
}

// Used returns the bytes of valid records.
func (l *Log) Used() int64 { return l.off }

// Next returns the sequence number the next record gets.
func (l *Log) Next() uint64 { return l.next }

// Reset starts the log over at its beginning; the caller guarantees that
// the store holds every record written so far (durably). The old records
// stay on disk but end the chain: their sequence numbers are lower.
func (l *Log) Reset() error {
	// The first new record overwrites the old first record; until then
	// the old chain replays, which is harmless (it is in the store).
	l.off = 0
	return nil
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }
