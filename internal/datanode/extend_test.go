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
	if err := st.Extend(2, len(v1), add, base, crc, gen, 0); err != nil {
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
	if err := st.Extend(2, len(v2), add2, crc, Checksum(v3, extBS), gen, 0); err != nil {
		t.Fatalf("second extend: %v", err)
	}
	copy(want, v3)
	if got := readAll(t, st, 2); !bytes.Equal(got, want) {
		t.Fatal("twice extended block reads other bytes")
	}
}

// TestExtendOnlyTheVersionNamed: an extension applies only to the version
// its base names. After an extension nobody committed, an extension of the
// committed version is refused (the client copies the block instead), and
// so is a late request for a version another extension has grown since
// (it would overwrite what that one wrote); readers of the committed
// versions keep reading them. A wrong checksum, another generation, past
// the block's end: refused.
func TestExtendOnlyTheVersionNamed(t *testing.T) {
	st := newExtVolume(t)
	const gen = 9
	v1 := pattern(10000, 1)
	base := Checksum(v1, extBS)
	if err := st.Write(1, v1, base, gen); err != nil {
		t.Fatal(err)
	}
	// Grown by 3000 bytes and committed, then a late request for v1.
	a2 := pattern(3000, 5)
	v2 := append(bytes.Clone(v1), a2...)
	if err := st.Extend(1, len(v1), a2, base, Checksum(v2, extBS), gen, 0); err != nil {
		t.Fatal(err)
	}
	late := pattern(10, 3)
	if err := st.Extend(1, len(v1), late, base, Checksum(append(bytes.Clone(v1), late...), extBS), gen, 0); !errors.Is(err, ErrChecksum) {
		t.Errorf("a late extension of the older version: %v, want refused", err)
	}
	buf := make([]byte, extBS)
	if err := st.ReadPrefix(1, buf, NoTicket, len(v2), Checksum(v2, extBS)); err != nil || !bytes.Equal(buf[:len(v2)], v2) {
		t.Fatalf("the committed second version after a late extension: %v", err)
	}
	// Grown again, never committed; the committed v2 cannot be extended
	// now, and stays readable.
	junk := pattern(9000, 5)
	if err := st.Extend(1, len(v2), junk, Checksum(v2, extBS), Checksum(append(bytes.Clone(v2), junk...), extBS), gen, 0); err != nil {
		t.Fatal(err)
	}
	add := pattern(30, 8)
	v3 := append(bytes.Clone(v2), add...)
	if err := st.Extend(1, len(v2), add, Checksum(v2, extBS), Checksum(v3, extBS), gen, 0); !errors.Is(err, ErrChecksum) {
		t.Errorf("extension over an uncommitted one: %v, want refused", err)
	}
	if err := st.ReadPrefix(1, buf, NoTicket, len(v2), Checksum(v2, extBS)); err != nil || !bytes.Equal(buf[:len(v2)], v2) {
		t.Fatalf("the committed version after refusals: %v", err)
	}
	// Other refusals, on a clean block.
	if err := st.Write(2, v1, base, gen); err != nil {
		t.Fatal(err)
	}
	if err := st.Extend(2, len(v1), add, base, 12345, gen, 0); !errors.Is(err, ErrChecksum) {
		t.Errorf("wrong result checksum: %v", err)
	}
	v1a := append(bytes.Clone(v1), add...)
	if err := st.Extend(2, len(v1), add, base, Checksum(v1a, extBS), gen+1, 0); !errors.Is(err, auth.ErrTicketRange) {
		t.Errorf("newer generation than the block's: %v", err)
	}
	if err := st.Extend(2, len(v1), add, base, Checksum(v1a, extBS), gen-1, 0); !errors.Is(err, auth.ErrTicketStale) {
		t.Errorf("older generation than the block's: %v", err)
	}
	if err := st.Extend(2, extBS-10, add, base, 0, gen, 0); err == nil {
		t.Error("extension past the block's end accepted")
	}
	want := make([]byte, extBS)
	copy(want, v1)
	if got := readAll(t, st, 2); !bytes.Equal(got, want) {
		t.Fatal("a refused extension changed the block")
	}
}

// TestExtendBeyondWhatIsOnDisk: a version whose committed length lies past
// the bytes on disk (grown by zeros the writer did not send) extends with
// the zeros between written out (and synced before the entry counting
// them), whatever the disk held there before.
func TestExtendBeyondWhatIsOnDisk(t *testing.T) {
	st := newExtVolume(t)
	const gen = 3
	full := pattern(extBS, 4) // the block's earlier life
	if err := st.Write(0, full, Checksum(full, extBS), gen-1); err != nil {
		t.Fatal(err)
	}
	v1 := pattern(100, 6)
	c1 := Checksum(v1, extBS)
	if err := st.Write(0, v1, c1, gen); err != nil {
		t.Fatal(err)
	}
	// Grown to 20000 bytes by zeros: nothing sent, the block unchanged.
	if err := st.Extend(0, 100, nil, c1, c1, gen, 0); err != nil {
		t.Fatalf("growth by zeros: %v", err)
	}
	add := pattern(10, 1)
	v2 := make([]byte, 20010)
	copy(v2, v1)
	copy(v2[20000:], add)
	if err := st.Extend(0, 20000, add, c1, Checksum(v2, extBS), gen, 0); err != nil {
		t.Fatalf("extension past what is on disk: %v", err)
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
			if err := st.Extend(4, n, add, crc, next, gen, 0); err != nil {
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

// TestExtendRefusesOlderTickets: an append ticket granted before one the
// block was extended with is refused even where its checksums match (a
// ticket of an ended transaction, replayed, would write over the later
// extension). Tickets from before the datanode's registration are the
// server's to refuse (writeFloor, TestWriteFloor).
func TestExtendRefusesOlderTickets(t *testing.T) {
	st := newExtVolume(t)
	const gen = 4
	v1 := pattern(1000, 1)
	c1 := Checksum(v1, extBS)
	if err := st.Write(5, v1, c1, gen); err != nil {
		t.Fatal(err)
	}
	a := pattern(10, 2)
	c2 := Checksum(append(bytes.Clone(v1), a...), extBS)
	if err := st.Extend(5, len(v1), a, c1, c2, gen, 50); err != nil {
		t.Fatal(err)
	}
	b := pattern(10, 3)
	c3 := Checksum(append(append(bytes.Clone(v1), a...), b...), extBS)
	if err := st.Extend(5, len(v1)+10, b, c2, c3, gen, 40); !errors.Is(err, auth.ErrTicketStale) {
		t.Errorf("a ticket older than the block's last extension: %v, want refused", err)
	}
	if err := st.Extend(5, len(v1)+10, b, c2, c3, gen, 60); err != nil {
		t.Errorf("a later ticket: %v", err)
	}
}

// TestWriteFloor: before a registration nothing is admitted; afterwards
// tickets from the registration's generation on; losing the namenode
// refuses everything again, and the next registration never lowers the
// floor.
func TestWriteFloor(t *testing.T) {
	var f writeFloor
	f.refuseAll()
	if ok, _ := f.admits(1 << 62); ok {
		t.Error("admitted before a registration")
	}
	f.raise(100)
	for seq, want := range map[uint64]bool{99: false, 100: true, 101: true} {
		if ok, _ := f.admits(seq); ok != want {
			t.Errorf("floor 100, ticket %d: admitted %v", seq, ok)
		}
	}
	f.raise(50)
	if ok, _ := f.admits(60); ok {
		t.Error("the floor went down")
	}
	f.refuseAll()
	if ok, _ := f.admits(200); ok {
		t.Error("admitted while not registered")
	}
	f.raise(150)
	if ok, _ := f.admits(150); !ok {
		t.Error("not admitted after registering again")
	}
}
