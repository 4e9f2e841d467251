package datanode

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestInitAfterInterruptedInit: a volume whose init was interrupted (its
// files there, its config, written last, not) is made again rather than
// refused, so a Ctrl-C during the first 'make run' does not block the next.
func TestInitAfterInterruptedInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"data", "crc"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := InitWith(dir, "c", 64<<10, 16*64<<10, PreallocZero); err != nil {
		t.Fatalf("init over an interrupted init: %v", err)
	}
	if _, err := InitWith(dir, "c", 64<<10, 16*64<<10, PreallocZero); err == nil {
		t.Fatal("init over a complete volume succeeded")
	}
}

// TestShortBlockStoresOnlyItsPages: a block with little data costs the
// disk its data rounded up to a page: the bytes after that page keep what
// was there, yet the block reads as its data and zeros, before and after
// the volume is reopened; a local writer's short block is adopted alike.
func TestShortBlockStoresOnlyItsPages(t *testing.T) {
	dir := t.TempDir()
	const bs = 64 << 10
	if _, err := InitWith(dir, "test", bs, 8*bs, PreallocFallocate); err != nil {
		t.Fatal(err)
	}
	st, err := OpenBlockStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Slots 1 and 3 hold old bytes, as freed blocks do.
	old := bytes.Repeat([]byte{0xee}, bs)
	for _, b := range []int64{1, 3} {
		if _, err := st.DataFile().WriteAt(old, b*bs); err != nil {
			t.Fatal(err)
		}
	}
	short := bytes.Repeat([]byte{'s'}, 100)
	if err := st.Write(1, short, Checksum(short, bs), 7); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DataFile().WriteAt(short, 3*bs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DataFile().WriteAt(make([]byte, 4096-100), 3*bs+100); err != nil {
		t.Fatal(err)
	}
	if err := st.Adopt(3, len(short), Checksum(short, bs), 7, make([]byte, bs)); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, bs)
	if _, err := st.DataFile().ReadAt(raw, 1*bs); err != nil {
		t.Fatal(err)
	}
	if raw[4096] != 0xee || raw[bs-1] != 0xee || raw[100] != 0 {
		t.Fatalf("slot 1 on disk: byte 100 %#x, 4096 %#x, last %#x: want 0, 0xee, 0xee (only one page written)", raw[100], raw[4096], raw[bs-1])
	}
	want := make([]byte, bs)
	copy(want, short)
	check := func(st *BlockStore, when string) {
		for _, b := range []uint64{1, 3} {
			buf := bytes.Repeat([]byte{0xaa}, bs)
			crc, n, err := st.ReadN(b, buf, 7)
			if err != nil || !bytes.Equal(buf, want) || crc != Checksum(short, bs) || n != 4096 {
				t.Fatalf("%s: block %d: err %v, n %d, equal %v", when, b, err, n, bytes.Equal(buf, want))
			}
		}
	}
	check(st, "written")
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err = OpenBlockStore(dir); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check(st, "reopened")
	// A whole block written over it again is whole.
	if err := st.Write(1, old, Checksum(old, bs), 8); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, bs)
	if _, n, err := st.ReadN(1, buf, 8); err != nil || n != bs || !bytes.Equal(buf, old) {
		t.Fatalf("whole block over a short one: %v, n %d", err, n)
	}
}
