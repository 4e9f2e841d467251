package datanode

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/wire"
)

// dataAt reports whether the data file has pages allocated in [off,
// off+n) (SEEK_DATA).
func dataAt(t *testing.T, f *os.File, off, n int64) bool {
	t.Helper()
	at, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return at < off+n
}

// TestReleasedWholeBlockKeepsItsPages: on a layout-3 volume a released
// whole block's slot keeps its pages (the data file's disk use stays, they
// are not used bytes, they are kept bytes) and reads as an empty block; a
// whole block written there takes no new pages; a short block written
// there punches the kept pages it does not cover, so nothing of the
// previous owner is left on disk past its data, also for a local writer's
// adopted block; an extension in place of a kept slot is refused; the kept
// state survives reopening and is in the registration's slot report.
// Fails without keeping (the disk use drops at the release, and the next
// whole block allocates again).
func TestReleasedWholeBlockKeepsItsPages(t *testing.T) {
	dir := t.TempDir()
	const bs = 1 << 20
	cfg, err := InitSparse(dir, "test", bs, 64<<20, DefaultSlotBytes)
	if err != nil {
		t.Fatal(err)
	}
	entries := int64(cfg.Blocks) * metaEntry
	path := filepath.Join(dir, "data")
	st, err := OpenBlockStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	pattern := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	write := func(b uint64, d []byte) {
		t.Helper()
		if err := st.Write(b, d, Checksum(d, bs), NoTicket); err != nil {
			t.Fatal(err)
		}
		if err := st.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	release := func(b uint64) {
		t.Helper()
		if err := st.Release(b, 1); err != nil {
			t.Fatal(err)
		}
		if err := st.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	disk := func() int64 { return diskUse(t, path) - entries }
	readBack := func(b uint64, want []byte) {
		t.Helper()
		buf := make([]byte, bs)
		crc, n, err := st.ReadN(b, buf, NoTicket)
		if err != nil {
			t.Fatalf("read block %d: %v", b, err)
		}
		full := append(append([]byte(nil), want...), make([]byte, bs-len(want))...)
		if !bytes.Equal(buf, full) || crc != Checksum(want, bs) || n != onDisk(len(want), bs) {
			t.Fatalf("block %d reads %d bytes from disk (want %d), %d differ from its %d bytes and zeros", b, n, onDisk(len(want), bs), countDiff(buf, full), len(want))
		}
	}

	write(7, pattern('A', bs))
	before := disk()
	release(7)
	if _, used := st.Space(); used != 0 || st.KeptBytes() != bs {
		t.Fatalf("after releasing a whole block: %d bytes used, %d kept; want 0 and %d", used, st.KeptBytes(), bs)
	}
	if got := disk(); got != before {
		t.Fatalf("releasing a whole block changed the disk use from %d to %d: its pages were not kept", before, got)
	}
	readBack(7, nil)
	if !dataAt(t, st.data, 7*bs, bs) {
		t.Fatal("the kept slot has no pages")
	}
	if err := st.Extend(7, 0, []byte("x"), Checksum(nil, bs), Checksum([]byte("x"), bs), NoTicket, 0); err == nil {
		t.Fatal("an extension in place of an empty (kept) slot was accepted")
	}

	write(7, pattern('B', bs))
	if got := disk(); got != before {
		t.Fatalf("a whole block written into a kept slot changed the disk use from %d to %d", before, got)
	}
	readBack(7, pattern('B', bs))
	if st.KeptBytes() != 0 {
		t.Fatalf("%d bytes kept after the slot was written over", st.KeptBytes())
	}

	// Kept across reopening, and reported.
	release(7)
	st.Close()
	if st, err = OpenBlockStore(dir); err != nil {
		t.Fatal(err)
	}
	if st.KeptBytes() != bs {
		t.Fatalf("after reopening, %d bytes kept, want %d", st.KeptBytes(), bs)
	}
	readBack(7, nil)
	if rep := st.slotReport(); len(rep) != 1 || rep[0].Index != wire.SlotKept || rep[0].Replicas[0].Start != 7 || rep[0].Count != 1 {
		t.Fatalf("slot report %+v: want slot 7 kept", rep)
	}

	// A short block into the kept slot: the rest of its pages go.
	short := pattern('C', 5000)
	write(7, short)
	readBack(7, short)
	if dataAt(t, st.data, 7*bs+8192, bs-8192) {
		t.Fatal("pages of the previous block are left on disk past a short block written into a kept slot")
	}
	if got := disk(); got != 8192 {
		t.Fatalf("a 5000-byte block in a kept slot takes %d bytes of disk, want 8192", got)
	}
	if rep := st.slotReport(); len(rep) != 1 || rep[0].Index != wire.SlotHolds {
		t.Fatalf("slot report %+v: want slot 7 holding a block", rep)
	}

	// A local writer's short block, adopted, alike.
	write(8, pattern('D', bs))
	release(8)
	local := pattern('E', 100)
	page := append(append([]byte(nil), local...), make([]byte, pageSize-len(local))...)
	if _, err := st.data.WriteAt(page, 8*bs); err != nil {
		t.Fatal(err)
	}
	if err := st.Adopt(8, len(local), Checksum(local, bs), NoTicket, make([]byte, bs)); err != nil {
		t.Fatal(err)
	}
	readBack(8, local)
	if dataAt(t, st.data, 8*bs+pageSize, bs-pageSize) {
		t.Fatal("pages of the previous block are left on disk past an adopted short block written into a kept slot")
	}
	raw := make([]byte, bs)
	if _, err := st.data.ReadAt(raw, 8*bs); err != nil {
		t.Fatal(err)
	}
	if bytes.IndexByte(raw, 'D') >= 0 {
		t.Fatal("the previous block's bytes are still in the slot's range of the data file")
	}
}

// TestLayout2VolumeOpensAsLayout3: a volume of layout 2 (sparse, from the
// previous version) opens with its blocks as they were, is recorded as
// layout 3 in its config, and keeps released whole blocks from then on.
func TestLayout2VolumeOpensAsLayout3(t *testing.T) {
	dir := t.TempDir()
	const bs = 64 << 10
	if _, err := InitSparse(dir, "test", bs, 4<<20, DefaultSlotBytes); err != nil {
		t.Fatal(err)
	}
	setLayout := func(l int) {
		st, err := OpenBlockStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.Config
		st.Close()
		cfg.Layout = l
		if err := writeConfig(dir, &cfg); err != nil {
			t.Fatal(err)
		}
	}
	setLayout(layoutSparse)
	// Written as layout 2 writes: same entries.
	st, err := OpenBlockStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	whole, short := bytes.Repeat([]byte{1}, bs), []byte("short block")
	for b, d := range map[uint64][]byte{3: whole, 4: short} {
		if err := st.Write(b, d, Checksum(d, bs), 5); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	setLayout(layoutSparse)

	if st, err = OpenBlockStore(dir); err != nil {
		t.Fatalf("a layout-2 volume does not open: %v", err)
	}
	defer st.Close()
	b, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Config.Layout != layoutKept || !bytes.Contains(b, []byte(`"layout": 3`)) {
		t.Fatalf("opened layout-2 volume: layout %d, config %s", st.Config.Layout, b)
	}
	buf := make([]byte, bs)
	for blk, d := range map[uint64][]byte{3: whole, 4: short} {
		if _, err := st.Read(blk, buf, 5); err != nil || !bytes.Equal(buf[:len(d)], d) {
			t.Fatalf("block %d after the upgrade: %v", blk, err)
		}
	}
	if _, used := st.Space(); used != bs+pageSize {
		t.Fatalf("after the upgrade %d bytes used, want %d", used, bs+pageSize)
	}
	if err := st.Release(3, 2); err != nil {
		t.Fatal(err)
	}
	if st.KeptBytes() != bs || st.Gen(3) != 5 {
		t.Fatalf("after releasing a whole and a short block: %d kept (want %d), generation %d (want 5)", st.KeptBytes(), bs, st.Gen(3))
	}
}

func countDiff(a, b []byte) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n + max(len(a), len(b)) - min(len(a), len(b))
}

// TestStrayPagesTrimmedAtOpen: pages a killed writer left in slots past
// what their entries say (a local writer's block never adopted, a write's
// data without its entry) are punched when the volume opens, so they are
// neither on disk nor counted; blocks and kept pages stay.
func TestStrayPagesTrimmedAtOpen(t *testing.T) {
	dir := t.TempDir()
	const bs = 1 << 20
	cfg, err := InitSparse(dir, "test", bs, 64<<20, DefaultSlotBytes)
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenBlockStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	short := []byte("a block of a few bytes")
	whole := bytes.Repeat([]byte{9}, bs)
	if err := st.Write(3, short, Checksum(short, bs), NoTicket); err != nil {
		t.Fatal(err)
	}
	if err := st.Write(4, whole, Checksum(whole, bs), NoTicket); err != nil {
		t.Fatal(err)
	}
	if err := st.Release(4, 1); err != nil {
		t.Fatal(err)
	}
	// What killed writers leave: pages in an empty slot, and past a
	// short block's page.
	junk := bytes.Repeat([]byte{7}, 3*pageSize)
	for _, off := range []int64{10 * bs, 3*bs + 2*pageSize} {
		if _, err := st.data.WriteAt(junk, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = OpenBlockStore(dir); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	metaOff := int64(cfg.Blocks) * bs
	var pages int64
	for off := int64(0); off < metaOff; {
		from, err := unix.Seek(int(st.data.Fd()), off, unix.SEEK_DATA)
		if err != nil || from >= metaOff {
			break
		}
		to, err := unix.Seek(int(st.data.Fd()), from, unix.SEEK_HOLE)
		if err != nil {
			t.Fatal(err)
		}
		pages += min(to, metaOff) - from
		off = to
	}
	if pages != pageSize+bs {
		t.Fatalf("after reopening, the slots have %d bytes of pages, want %d (a short block's page, a kept block)", pages, pageSize+bs)
	}
	buf := make([]byte, bs)
	if _, err := st.Read(3, buf, NoTicket); err != nil || !bytes.Equal(buf[:len(short)], short) {
		t.Fatalf("block 3 after the trim: %v", err)
	}
	if st.KeptBytes() != bs || !dataAt(t, st.data, 4*bs, bs) {
		t.Fatal("the kept slot lost its pages")
	}
}
