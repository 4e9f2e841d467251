package datanode

import (
	"bytes"
	"path/filepath"
	"syscall"
	"testing"
)

func diskUse(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestSparseVolumeHoldsOnlyPages: a sparse volume has a slot per page of
// its capacity; blocks take the pages their data covers (on disk and in
// Space), a slot rewritten shorter gives back its old tail, a released
// slot gives back everything and reads as an empty block, and reopening
// recounts the same use from the entries.
func TestSparseVolumeHoldsOnlyPages(t *testing.T) {
	dir := t.TempDir()
	const bs = 1 << 20
	cfg, err := InitSparse(dir, "test", bs, 64<<20, DefaultSlotBytes)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Blocks != 64<<20/DefaultSlotBytes || cfg.Layout != layoutKept || cfg.Capacity != 64<<20 {
		t.Fatalf("config %+v: want %d slots of a sparse volume of 64 MiB", cfg, 64<<20/DefaultSlotBytes)
	}
	data := filepath.Join(dir, "data")
	entries := int64(cfg.Blocks) * metaEntry
	if got := diskUse(t, data); got > entries+64<<10 {
		t.Fatalf("a new sparse volume takes %d bytes of disk, want about its entries (%d)", got, entries)
	}
	st, err := OpenBlockStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	write := func(b uint64, n int) []byte {
		d := bytes.Repeat([]byte{byte(b + 1)}, n)
		if err := st.Write(b, d, Checksum(d, bs), NoTicket); err != nil {
			t.Fatal(err)
		}
		return d
	}
	used := func(want int64) {
		t.Helper()
		if err := st.Sync(); err != nil {
			t.Fatal(err)
		}
		if _, u := st.Space(); u != want {
			t.Fatalf("Space says %d bytes used, want %d", u, want)
		}
		if got := diskUse(t, data) - entries; got < want || got > want+64<<10 {
			t.Fatalf("the data file holds %d bytes of blocks on disk, want %d", got, want)
		}
	}
	write(5, bs)
	write(9000, 10000)
	write(16000, 1)
	if _, u := st.Space(); u != 0 {
		t.Fatalf("Space says %d bytes used before a Sync: it counts blocks not synced yet (their writers' allocations count them)", u)
	}
	used(bs + 12288 + 4096)
	short := write(5, 5000)
	used(8192 + 12288 + 4096)
	if err := st.Release(9000, 1); err != nil {
		t.Fatal(err)
	}
	used(8192 + 4096)
	buf := make([]byte, bs)
	if _, err := st.Read(9000, buf, NoTicket); err != nil || !bytes.Equal(buf, make([]byte, bs)) {
		t.Fatalf("a released slot: %v, or not zeros", err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = OpenBlockStore(dir); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	used(8192 + 4096)
	if _, err := st.Read(5, buf, NoTicket); err != nil || !bytes.Equal(buf[:len(short)], short) {
		t.Fatalf("block 5 after reopening: %v, or not its data", err)
	}
}
