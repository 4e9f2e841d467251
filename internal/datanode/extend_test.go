package datanode

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/plasmafs/plasma/internal/auth"
)

const extBS = 64 << 10

func newExtVolume(t *testing.T) *BlockStore {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vol")
	if _, err := InitWith(dir, "test", extBS, 8*extBS, PreallocFallocate); err != nil {
		t.Fatal(err)
	}
	st := openVolume(t, dir)
	t.Cleanup(func() { st.Close() })
	return st
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// readAll reads block whole (its stored checksum checked).
func readAll(t *testing.T, st *BlockStore, block uint64) []byte {
	t.Helper()
	buf := make([]byte, extBS)
	if _, err := st.Read(block, buf, NoTicket); err != nil {
		t.Fatalf("read block %d: %v", block, err)
	}
	return buf
}

// TestExtendInPlace: an extension writes only past the committed bytes,
// the block reads whole with the new checksum, and a reader of the
// version before reads its prefix.
func TestExtendInPlace(t *testing.T) {
	st := newExtVolume(t)
	const gen = 7
	v1 := pattern(5000, 1)
	if err := st.Write(2, v1, Checksum(v1, extBS), gen); err != nil {
		t.Fatal(err)
	}
	base := Checksum(v1, extBS)
	add := pattern(100, 9)
	v2 := append(bytes.Clone(v1), add...)
	crc := Checksum(v2, extBS)
	if err := st.Extend(2, len(v1), add, base, crc, gen); err != nil {
		t.Fatalf("extend: %v", err)
	}
	want := make([]byte, extBS)
	copy(want, v2)
	if got := readAll(t, st, 2); !bytes.Equal(got, want) {
		t.Fatal("extended block reads other bytes")
	}
	buf := make([]byte, extBS)
	if err := st.ReadPrefix(2, buf, NoTicket, len(v1), base); err != nil {
		t.Fatalf("reader of the first version: %v", err)
	}
	if !bytes.Equal(buf[:len(v1)], v1) || !allZero(buf[len(v1):]) {
		t.Fatal("prefix read returned other bytes")
	}
	// A second extension, crossing into further pages.
	add2 := pattern(20000, 3)
	v3 := append(bytes.Clone(v2), add2...)
	if err := st.Extend(2, len(v2), add2, crc, Checksum(v3, extBS), gen); err != nil {
		t.Fatalf("second extend: %v", err)
	}
	copy(want, v3)
	if got := readAll(t, st, 2); !bytes.Equal(got, want) {
		t.Fatal("twice extended block reads other bytes")
	}
}

// TestExtendOverUncommitted: bytes of an extension nobody committed do not
// hinder the next extension of the committed version, which zeroes them;
// an extension of another version, a checksum that does not match, another
// generation are refused.
func TestExtendOverUncommitted(t *testing.T) {
	st := newExtVolume(t)
	const gen = 9
	v1 := pattern(10000, 1)
	base := Checksum(v1, extBS)
	if err := st.Write(1, v1, base, gen); err != nil {
		t.Fatal(err)
	}
	// Extended by 9000 bytes, never committed.
	junk := pattern(9000, 5)
	if err := st.Extend(1, len(v1), junk, base, Checksum(append(bytes.Clone(v1), junk...), extBS), gen); err != nil {
		t.Fatal(err)
	}
	// The committed version extended again, by less.
	add := pattern(30, 8)
	v2 := append(bytes.Clone(v1), add...)
	if err := st.Extend(1, len(v1), add, base, Checksum(v2, extBS), gen); err != nil {
		t.Fatalf("extend over uncommitted bytes: %v", err)
	}
	want := make([]byte, extBS)
	copy(want, v2)
	if got := readAll(t, st, 1); !bytes.Equal(got, want) {
		t.Fatal("bytes of the uncommitted extension survived")
	}
	// Refusals.
	other := pattern(10000, 2)
	if err := st.Extend(1, len(v2), add, Checksum(other, extBS), Checksum(append(bytes.Clone(other), add...), extBS), gen); !errors.Is(err, ErrChecksum) {
		t.Errorf("extension of another version: %v", err)
	}
	if err := st.Extend(1, len(v2), add, Checksum(v2, extBS), 12345, gen); !errors.Is(err, ErrChecksum) {
		t.Errorf("wrong result checksum: %v", err)
	}
	v3 := append(bytes.Clone(v2), add...)
	if err := st.Extend(1, len(v2), add, Checksum(v2, extBS), Checksum(v3, extBS), gen+1); !errors.Is(err, auth.ErrTicketRange) {
		t.Errorf("newer generation than the block's: %v", err)
	}
	if err := st.Extend(1, len(v2), add, Checksum(v2, extBS), Checksum(v3, extBS), gen-1); !errors.Is(err, auth.ErrTicketStale) {
		t.Errorf("older generation than the block's: %v", err)
	}
	if err := st.Extend(1, extBS-10, add, Checksum(v2, extBS), 0, gen); err == nil {
		t.Error("extension past the block's end accepted")
	}
	if got := readAll(t, st, 1); !bytes.Equal(got, want) {
		t.Fatal("a refused extension changed the block")
	}
}

// TestExtendAfterShortWrite: a block written short (its tail not on disk)
// and extended past its data's last page reads zeros between, whatever the
// disk held there before.
func TestExtendAfterShortWrite(t *testing.T) {
	st := newExtVolume(t)
	const gen = 3
	full := pattern(extBS, 4) // the block's earlier life
	if err := st.Write(0, full, Checksum(full, extBS), gen); err != nil {
		t.Fatal(err)
	}
	v1 := pattern(100, 6) // reallocated and written short
	if err := st.Write(0, v1, Checksum(v1, extBS), gen+1); err != nil {
		t.Fatal(err)
	}
	// Committed length 100, but the append lands at 20000 (the file grew
	// with a hole): 100..20000 must read as zeros.
	add := pattern(10, 1)
	v2 := make([]byte, 20010)
	copy(v2, v1)
	copy(v2[20000:], add)
	if err := st.Extend(0, 20000, add, Checksum(v1, extBS), Checksum(v2, extBS), gen+1); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, extBS)
	copy(want, v2)
	if got := readAll(t, st, 0); !bytes.Equal(got, want) {
		t.Fatal("bytes of the block's earlier life came back")
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestReadersOfOlderVersionsDuringExtension: while a block grows by one
// append after another, readers of every earlier version read it without
// an error and get exactly its bytes.
func TestReadersOfOlderVersionsDuringExtension(t *testing.T) {
	st := newExtVolume(t)
	const gen = 5
	content := pattern(3000, 2)
	if err := st.Write(4, content, Checksum(content, extBS), gen); err != nil {
		t.Fatal(err)
	}
	type version struct {
		n   int
		crc uint32
	}
	versions := make(chan version, 1024)
	versions <- version{len(content), Checksum(content, extBS)}
	full := pattern(extBS, 2) // every version is a prefix of this
	copy(full, content)
	done := make(chan error, 1)
	go func() {
		defer close(versions)
		n, crc := len(content), Checksum(content, extBS)
		for n+301 < extBS {
			add := full[n : n+301]
			next := Checksum(full[:n+301], extBS)
			if err := st.Extend(4, n, add, crc, next, gen); err != nil {
				done <- err
				return
			}
			n, crc = n+301, next
			versions <- version{n, crc}
		}
		done <- nil
	}()
	var seen []version
	buf := make([]byte, extBS)
	for v := range versions {
		seen = append(seen, v)
		// The first version, one in the middle and the newest.
		for _, old := range []version{seen[0], seen[len(seen)/2], v} {
			if err := st.ReadPrefix(4, buf, NoTicket, old.n, old.crc); err != nil {
				t.Fatalf("reader of the %d-byte version: %v", old.n, err)
			}
			if !bytes.Equal(buf[:old.n], full[:old.n]) || !allZero(buf[old.n:]) {
				t.Fatalf("reader of the %d-byte version got other bytes", old.n)
			}
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("extend: %v", err)
	}
}
