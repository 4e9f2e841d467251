package namenode

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

func testEntries(from, to, term uint64, size int) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand,
			AppendedAt: time.Unix(0, int64(i)), Data: bytes.Repeat([]byte{byte(i), byte(term)}, size/2)})
	}
	return out
}

// checkRaftLog checks that l holds exactly first..last, each entry's data
// as testEntries made it with the term termOf gives.
func checkRaftLog(t *testing.T, l *raftLog, first, last uint64, termOf func(uint64) uint64, size int) {
	t.Helper()
	if f, _ := l.FirstIndex(); f != first {
		t.Fatalf("first index %d, want %d", f, first)
	}
	if la, _ := l.LastIndex(); la != last {
		t.Fatalf("last index %d, want %d", la, last)
	}
	for i := first; i <= last && last != 0; i++ {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		want := testEntries(i, i, termOf(i), size)[0]
		if e.Index != i || e.Term != want.Term || e.Type != raft.LogCommand || !bytes.Equal(e.Data, want.Data) || !e.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("entry %d: %+v, want %+v", i, e, want)
		}
	}
	var e raft.Log
	if err := l.GetLog(last+1, &e); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog past the end: %v", err)
	}
}

// checkZerosAfterLog checks that the file holds only zeros after the log.
func checkZerosAfterLog(t *testing.T, l *raftLog) {
	t.Helper()
	b, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) <= l.end {
		t.Fatalf("file of %d bytes, no room after the log's %d", len(b), l.end)
	}
	if i := bytes.IndexFunc(b[l.end:], func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("non-zero byte at %d, after the log's end at %d", l.end+int64(i), l.end)
	}
}

func reopenRaftLog(t *testing.T, l *raftLog) *raftLog {
	t.Helper()
	l.Close()
	l, err := openRaftLog(l.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestRaftLogStoresAndReopens(t *testing.T) {
	l, err := openRaftLog(filepath.Join(t.TempDir(), raftLogFile))
	if err != nil {
		t.Fatal(err)
	}
	checkRaftLog(t, l, 0, 0, nil, 0)
	if err := l.StoreLogs(testEntries(1, 10, 1, 100)); err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLog(testEntries(11, 11, 2, 100)[0]); err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(testEntries(13, 13, 2, 100)); err == nil {
		t.Fatal("an entry after a gap was stored")
	}
	term := func(i uint64) uint64 { return map[bool]uint64{true: 1, false: 2}[i <= 10] }
	checkRaftLog(t, l, 1, 11, term, 100)
	checkRaftLog(t, reopenRaftLog(t, l), 1, 11, term, 100)
}

// A batch torn by a crash (its last record half written) ends the log at
// the last intact record; the cut is made at open, so later appends are
// read back and nothing of the torn batch comes back.
func TestRaftLogCutsATornTail(t *testing.T) {
	l, err := openRaftLog(filepath.Join(t.TempDir(), raftLogFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(testEntries(1, 5, 1, 100)); err != nil {
		t.Fatal(err)
	}
	intact := l.end
	if err := l.StoreLogs(testEntries(6, 8, 1, 100)); err != nil {
		t.Fatal(err)
	}
	// Entry 6 torn in the middle; 7 and 8 intact after it.
	if _, err := l.f.WriteAt(make([]byte, 40), intact+30); err != nil {
		t.Fatal(err)
	}
	l = reopenRaftLog(t, l)
	term1 := func(uint64) uint64 { return 1 }
	checkRaftLog(t, l, 1, 5, term1, 100)
	if l.end != intact {
		t.Fatalf("log ends at %d after the cut, want %d", l.end, intact)
	}
	checkZerosAfterLog(t, l)
	// The same indexes again, the same size: the old 7 and 8 must not
	// chain on after a new 6.
	if err := l.StoreLogs(testEntries(6, 6, 3, 100)); err != nil {
		t.Fatal(err)
	}
	l = reopenRaftLog(t, l)
	checkRaftLog(t, l, 1, 6, func(i uint64) uint64 { return map[bool]uint64{true: 1, false: 3}[i <= 5] }, 100)

	// Garbage after the last record (a half-written header) is cut too.
	if _, err := l.f.WriteAt([]byte{9, 9, 9}, l.end); err != nil {
		t.Fatal(err)
	}
	l = reopenRaftLog(t, l)
	checkRaftLog(t, l, 1, 6, func(i uint64) uint64 { return map[bool]uint64{true: 1, false: 3}[i <= 5] }, 100)
}

// Raft deletes a conflicting suffix and appends the new leader's entries
// in its place: after a reopen the log holds the new ones only, even
// when they are fewer and of the same size as those deleted.
func TestRaftLogTruncatesASuffix(t *testing.T) {
	l, err := openRaftLog(filepath.Join(t.TempDir(), raftLogFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(testEntries(1, 10, 1, 64)); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRange(6, 10); err != nil {
		t.Fatal(err)
	}
	term := func(i uint64) uint64 { return map[bool]uint64{true: 1, false: 2}[i <= 5] }
	checkRaftLog(t, l, 1, 5, term, 64)
	if err := l.StoreLogs(testEntries(6, 7, 2, 64)); err != nil {
		t.Fatal(err)
	}
	checkRaftLog(t, l, 1, 7, term, 64)
	checkZerosAfterLog(t, l)
	checkRaftLog(t, reopenRaftLog(t, l), 1, 7, term, 64)
}

// Compaction deletes a prefix; once it is large the file is rewritten
// without it. Deleting everything empties the log, which may then go on
// at any index (after a snapshot).
func TestRaftLogCompactsAPrefix(t *testing.T) {
	l, err := openRaftLog(filepath.Join(t.TempDir(), raftLogFile))
	if err != nil {
		t.Fatal(err)
	}
	l.compactAt = 1000
	if err := l.StoreLogs(testEntries(1, 20, 1, 100)); err != nil {
		t.Fatal(err)
	}
	term1 := func(uint64) uint64 { return 1 }
	if err := l.DeleteRange(1, 3); err != nil { // small: in memory only
		t.Fatal(err)
	}
	checkRaftLog(t, l, 4, 20, term1, 100)
	if err := l.DeleteRange(1, 14); err != nil { // rewritten
		t.Fatal(err)
	}
	checkRaftLog(t, l, 15, 20, term1, 100)
	if l.offs[0] != 0 {
		t.Fatalf("after compaction: the log starts at %d", l.offs[0])
	}
	checkZerosAfterLog(t, l)
	if err := l.StoreLogs(testEntries(21, 22, 1, 100)); err != nil {
		t.Fatal(err)
	}
	l = reopenRaftLog(t, l)
	l.compactAt = 1000
	checkRaftLog(t, l, 15, 22, term1, 100)
	if err := l.DeleteRange(3, 40); err != nil {
		t.Fatal(err)
	}
	checkRaftLog(t, l, 0, 0, term1, 100)
	if err := l.StoreLogs(testEntries(100, 101, 4, 100)); err != nil {
		t.Fatal(err)
	}
	checkRaftLog(t, reopenRaftLog(t, l), 100, 101, func(uint64) uint64 { return 4 }, 100)
}

// A member of the first version kept its log in raft.db: it is moved to
// raft.log at the next start; raft.log gone after that is a lost log.
func TestRaftLogMovesOutOfRaftDB(t *testing.T) {
	dir := t.TempDir()
	s, err := openRaftStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.db.Update(func(tx *bolt.Tx) error {
		for _, e := range testEntries(5, 9, 2, 50) {
			v := binary.BigEndian.AppendUint64(nil, e.Term)
			v = append(v, byte(e.Type))
			v = binary.BigEndian.AppendUint64(v, uint64(e.AppendedAt.UnixNano()))
			if err := tx.Bucket(raftLogBucket).Put(binary.BigEndian.AppendUint64(nil, e.Index), append(v, e.Data...)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := openRaftLogs(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	checkRaftLog(t, l, 5, 9, func(uint64) uint64 { return 2 }, 50)
	l.Close()
	n := 0
	s.eachLog(func(*raft.Log) { n++ })
	if n != 0 {
		t.Fatalf("%d entries left in raft.db", n)
	}
	if l, err = openRaftLogs(dir, s); err != nil {
		t.Fatal(err)
	}
	checkRaftLog(t, l, 5, 9, func(uint64) uint64 { return 2 }, 50)
	l.Close()
	os.Remove(filepath.Join(dir, raftLogFile))
	if _, err := openRaftLogs(dir, s); err == nil {
		t.Fatal("a member whose raft.log is gone opened an empty log")
	}
}
