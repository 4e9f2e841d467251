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

// legacyVolume makes a volume as plasma made them before the inline
// layout: data of blocks only, plain checksums in the file crc, no gen and
// no tail file (a volume from before generations and short blocks), and
// blocks 0..3 holding fill(1..4).
func legacyVolume(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const blocks = 16
	data := make([]byte, blocks*testBS)
	crcs := make([]byte, 4*blocks)
	for b := 0; b < blocks; b++ {
		if b < 4 {
			copy(data[b*testBS:], fill(byte(b+1)))
		}
		binary.LittleEndian.PutUint32(crcs[4*b:], Checksum(data[b*testBS:(b+1)*testBS], testBS))
	}
	for name, b := range map[string][]byte{"data": data, "crc": crcs,
		"config": []byte(`{"identity":"0123456789abcdef","cluster":"test","blocksize":4096,"blocks":16}`)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLegacyVolumeConverted: a volume of the old layout (entries in
// separate files; here from before generations and tails) opens, is
// converted to the inline layout (config says so, the old files are gone),
// its blocks read with any ticket, and it takes writes and reopens.
func TestLegacyVolumeConverted(t *testing.T) {
	dir := legacyVolume(t)
	st := openVolume(t, dir)
	if st.Config.Layout != layoutInline {
		t.Fatalf("layout %d after opening a legacy volume", st.Config.Layout)
	}
	for _, name := range []string{"crc", "gen", "tail"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s still there after the conversion: %v", name, err)
		}
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
	st.Sync()
	st.Close()
	st = openVolume(t, dir)
	defer st.Close()
	if _, err := st.Read(0, buf, 7); err != nil || !bytes.Equal(buf, fill(9)) {
		t.Fatalf("block 0 after reopening: %v", err)
	}
	if _, err := st.Read(1, buf, 0); err != nil || !bytes.Equal(buf, fill(2)) {
		t.Fatalf("block 1 after reopening: %v", err)
	}
}

// TestLegacyVolumeDamage: a legacy volume whose crc file is missing or
// truncated is refused with the file named, and left as it was.
func TestLegacyVolumeDamage(t *testing.T) {
	dir := legacyVolume(t)
	if err := os.Truncate(filepath.Join(dir, "crc"), 8); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenBlockStore(dir); err == nil || !bytes.Contains([]byte(err.Error()), []byte("crc is truncated")) {
		t.Fatalf("truncated crc file: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "data")); err != nil || fi.Size() != 16*testBS {
		t.Fatalf("data file of a refused volume changed: %v %v", fi.Size(), err)
	}
	os.Remove(filepath.Join(dir, "crc"))
	if _, err := OpenBlockStore(dir); err == nil || !bytes.Contains([]byte(err.Error()), []byte("damaged")) {
		t.Fatalf("missing crc file: %v", err)
	}
}

// TestTornGeneration: a block entry whose generation is not the one its
// checksum was recorded with (as a power cut could leave volumes that
// kept them in two files) fails its checksum instead of opening with an
// older ticket.
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
	metaOff := st.metaOff
	st.Close()
	// The generation in the entry as it was before the second write.
	var g [8]byte
	binary.LittleEndian.PutUint64(g[:], 5)
	f, err := os.OpenFile(filepath.Join(dir, "data"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(g[:], metaOff+2*metaEntry+8)
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
