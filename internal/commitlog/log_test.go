package commitlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func collect(t *testing.T, path string, minNext uint64) (*Log, []uint64, [][]byte) {
	t.Helper()
	var seqs []uint64
	var payloads [][]byte
	l, err := Open(path, 1<<16, minNext, func(seq uint64, p []byte) error {
		seqs = append(seqs, seq)
		payloads = append(payloads, append([]byte(nil), p...))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, seqs, payloads
}

func appendN(t *testing.T, l *Log, n int, size int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := l.Append(bytes.Repeat([]byte{byte(l.Next())}, size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestReplayInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l, seqs, _ := collect(t, path, 1)
	if len(seqs) != 0 {
		t.Fatalf("new log replays %v", seqs)
	}
	appendN(t, l, 50, 100)
	l.Close()
	l, seqs, payloads := collect(t, path, 1)
	defer l.Close()
	if len(seqs) != 50 || seqs[0] != 1 || seqs[49] != 50 {
		t.Fatalf("replayed %d records (%v…)", len(seqs), seqs[:min(3, len(seqs))])
	}
	for i, p := range payloads {
		if !bytes.Equal(p, bytes.Repeat([]byte{byte(i + 1)}, 100)) {
			t.Fatalf("record %d payload wrong", i+1)
		}
	}
	if l.Next() != 51 {
		t.Fatalf("next %d, want 51", l.Next())
	}
}

// TestTornTail: a last record cut short or damaged ends the log there;
// appends continue in its place.
func TestTornTail(t *testing.T) {
	for _, damage := range []string{"short", "flipped"} {
		t.Run(damage, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			l, _, _ := collect(t, path, 1)
			appendN(t, l, 10, 1000)
			end := l.Used()
			l.Close()
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if damage == "short" {
				// The last record's second half never reached the disk.
				f.WriteAt(make([]byte, 500), end-500)
			} else {
				f.WriteAt([]byte{0xFF}, end-10)
			}
			f.Close()
			l, seqs, _ := collect(t, path, 1)
			if len(seqs) != 9 || l.Next() != 10 {
				t.Fatalf("replayed %v, next %d; want 1..9 and 10", seqs, l.Next())
			}
			appendN(t, l, 2, 10)
			l.Close()
			l, seqs, _ = collect(t, path, 1)
			defer l.Close()
			if fmt.Sprint(seqs) != "[1 2 3 4 5 6 7 8 9 10 11]" {
				t.Fatalf("after appending in place of the torn record: %v", seqs)
			}
		})
	}
}

// TestReset: after a restart from the beginning, the stale records of the
// previous cycle behind the new ones are not replayed.
func TestReset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l, _, _ := collect(t, path, 1)
	appendN(t, l, 20, 200)
	if err := l.Reset(); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 2, 10) // 21, 22 over the start of the old records
	l.Close()
	l, seqs, _ := collect(t, path, 21)
	if fmt.Sprint(seqs) != "[21 22]" {
		t.Fatalf("replayed %v, want [21 22]", seqs)
	}
	// Reset and crash before the first new record: the old chain replays
	// (the caller skips what its store holds) and appends go on after it.
	if err := l.Reset(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, seqs, _ = collect(t, path, 23)
	if fmt.Sprint(seqs) != "[21 22]" || l.Next() != 23 {
		t.Fatalf("replayed %v next %d", seqs, l.Next())
	}
	appendN(t, l, 1, 10)
	l.Close()
	l, seqs, _ = collect(t, path, 23)
	defer l.Close()
	if fmt.Sprint(seqs) != "[21 22 23]" {
		t.Fatalf("replayed %v, want [21 22 23]", seqs)
	}
}

// TestBehindTheStore: when the caller's store is ahead of the whole chain
// (its records were checkpointed, the log's tail lost), the log starts
// over instead of leaving a gap that would hide later records.
func TestBehindTheStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l, _, _ := collect(t, path, 1)
	appendN(t, l, 5, 10)
	l.Close()
	l, _, _ = collect(t, path, 9)
	appendN(t, l, 2, 10) // 9, 10
	l.Close()
	l, seqs, _ := collect(t, path, 9)
	defer l.Close()
	if fmt.Sprint(seqs) != "[9 10]" {
		t.Fatalf("replayed %v, want [9 10]", seqs)
	}
}

// TestGrows: records beyond the preallocated size extend the file.
func TestGrows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	l, _, _ := collect(t, path, 1)
	appendN(t, l, 40, 4000) // 160 KB > 64 KiB preallocated
	l.Close()
	l, seqs, _ := collect(t, path, 1)
	defer l.Close()
	if len(seqs) != 40 {
		t.Fatalf("replayed %d of 40", len(seqs))
	}
}
