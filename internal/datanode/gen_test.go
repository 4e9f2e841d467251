package datanode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/plasmafs/plasma/internal/auth"
)

const testBS = 4096

func newVolume(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vol")
	if _, err := InitWith(dir, "test", testBS, 16*testBS, PreallocFallocate); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openVolume(t *testing.T, dir string) *BlockStore {
	t.Helper()
	st, err := OpenBlockStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func fill(b byte) []byte { return bytes.Repeat([]byte{b}, testBS) }

func write(st *BlockStore, block uint64, data []byte, gen uint64) error {
	return st.Write(block, data, Checksum(data, testBS), gen)
}

// TestGenerationChecks: a write needs a generation at least the block's
// and leaves it there; a read or verify needs the block's generation at
// most the ticket's; NoTicket is unchecked and changes nothing.
func TestGenerationChecks(t *testing.T) {
	dir := newVolume(t)
	st := openVolume(t, dir)
	buf := make([]byte, testBS)
	if err := write(st, 4, fill(1), 0); err != nil {
		t.Fatalf("never written block, generation 0: %v", err)
	}
	if err := write(st, 3, fill(1), 10); err != nil {
		t.Fatal(err)
	}
	if err := write(st, 3, fill(2), 10); err != nil {
		t.Fatalf("same generation again: %v", err)
	}
	if err := write(st, 3, fill(3), 9); !errors.Is(err, auth.ErrTicketStale) {
		t.Fatalf("older generation wrote: %v", err)
	}
	if _, err := st.Read(3, buf, 9); !errors.Is(err, auth.ErrTicketStale) {
		t.Fatalf("older ticket read: %v", err)
	}
	if _, _, err := st.Verify(2, 3, 9); !errors.Is(err, auth.ErrTicketStale) {
		t.Fatalf("older ticket verified: %v", err)
	}
	for _, g := range []uint64{10, 11, NoTicket} {
		if _, err := st.Read(3, buf, g); err != nil || !bytes.Equal(buf, fill(2)) {
			t.Fatalf("read with generation %#x: %v", g, err)
		}
	}
	if bad, _, err := st.Verify(3, 2, 10); err != nil || len(bad) != 0 {
		t.Fatalf("verify: %v %v", bad, err)
	}
	// Unchecked writes keep the generation.
	if err := write(st, 3, fill(4), NoTicket); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Read(3, buf, 9); !errors.Is(err, auth.ErrTicketStale) {
		t.Fatalf("an unchecked write lowered the generation: %v", err)
	}
	// Adopt checks and records as Write does.
	if _, err := st.data.WriteAt(fill(5), 5*testBS); err != nil {
		t.Fatal(err)
	}
	if err := st.Adopt(5, testBS, Checksum(fill(5), testBS), 20, make([]byte, testBS)); err != nil {
		t.Fatal(err)
	}
	if err := st.Adopt(5, testBS, Checksum(fill(5), testBS), 19, make([]byte, testBS)); !errors.Is(err, auth.ErrTicketStale) {
		t.Fatalf("adopt with an older generation: %v", err)
	}
	if _, err := st.Read(5, buf, 19); !errors.Is(err, auth.ErrTicketStale) {
		t.Fatalf("older ticket read an adopted block: %v", err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// Generations survive a restart.
	st = openVolume(t, dir)
	defer st.Close()
	if _, err := st.Read(3, buf, 9); !errors.Is(err, auth.ErrTicketStale) {
		t.Fatalf("after reopening, an older ticket read: %v", err)
	}
	if _, err := st.Read(5, buf, 20); err != nil || !bytes.Equal(buf, fill(5)) {
		t.Fatalf("after reopening: %v", err)
	}
	if err := write(st, 5, fill(6), 19); !errors.Is(err, auth.ErrTicketStale) {
		t.Fatalf("after reopening, an older generation wrote: %v", err)
	}
}

// TestVolumeWithoutGenerations: a volume from before generations (no gen
// file, plain checksums) opens, gets a zeroed gen file, and its blocks
// read with any ticket.
func TestVolumeWithoutGenerations(t *testing.T) {
	dir := newVolume(t)
	st := openVolume(t, dir)
	for b := uint64(0); b < 4; b++ {
		if err := write(st, b, fill(byte(b+1)), NoTicket); err != nil {
			t.Fatal(err)
		}
	}
	st.Sync()
	st.Close()
	if err := os.Remove(filepath.Join(dir, "gen")); err != nil {
		t.Fatal(err)
	}
	st = openVolume(t, dir)
	defer st.Close()
	fi, err := os.Stat(filepath.Join(dir, "gen"))
	if err != nil || fi.Size() != 16*8 {
		t.Fatalf("gen file: %v %v", fi, err)
	}
	buf := make([]byte, testBS)
	for b := uint64(0); b < 4; b++ {
		if _, err := st.Read(b, buf, 0); err != nil || !bytes.Equal(buf, fill(byte(b+1))) {
			t.Fatalf("block %d: %v", b, err)
		}
	}
	if err := write(st, 0, fill(9), 7); err != nil {
		t.Fatal(err)
	}
	// A truncated gen file is damage, named.
	st.Close()
	if err := os.Truncate(filepath.Join(dir, "gen"), 8); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBlockStore(dir); err == nil || !bytes.Contains([]byte(err.Error()), []byte("gen is truncated")) {
		t.Fatalf("truncated gen file: %v", err)
	}
}

// TestTornGeneration: if a block's new checksum entry reached the disk
// but its new generation did not (two files, written back independently),
// the block fails its checksum instead of opening with an older ticket.
func TestTornGeneration(t *testing.T) {
	dir := newVolume(t)
	st := openVolume(t, dir)
	if err := write(st, 2, fill(1), 5); err != nil {
		t.Fatal(err)
	}
	if err := write(st, 2, fill(2), 6); err != nil {
		t.Fatal(err)
	}
	st.Sync()
	st.Close()
	// The generation entry as it was before the second write.
	var g [8]byte
	binary.LittleEndian.PutUint64(g[:], 5)
	f, err := os.OpenFile(filepath.Join(dir, "gen"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(g[:], 2*8)
	f.Close()
	st = openVolume(t, dir)
	defer st.Close()
	buf := make([]byte, testBS)
	if _, err := st.Read(2, buf, 5); !errors.Is(err, ErrChecksum) {
		t.Fatalf("torn generation: read with the old ticket: %v", err)
	}
}

// TestStaleReaderRacingWriter: a reader whose ticket is older than a
// concurrent writer's never gets the writer's data.
func TestStaleReaderRacingWriter(t *testing.T) {
	st := openVolume(t, newVolume(t))
	defer st.Close()
	old, secret := fill('o'), fill('s')
	if err := write(st, 1, old, 1); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	leaked := make(chan bool, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, testBS)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := st.Read(1, buf, 1); err == nil && bytes.Contains(buf, []byte{'s'}) {
				select {
				case leaked <- true:
				default:
				}
				return
			}
		}
	}()
	for g := uint64(2); g < 2000; g++ {
		if err := write(st, 1, secret, g); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case <-leaked:
		t.Fatal("a reader with an older ticket read data written with a newer generation")
	default:
	}
}
