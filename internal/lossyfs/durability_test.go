package lossyfs_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/datanode"
)

// TestSecretsSurviveCut: the cluster secrets InitSecrets wrote are all
// there after a power cut (daemons were already given them).
func TestSecretsSurviveCut(t *testing.T) {
	m := mount(t)
	dir := m.path("cluster/secrets")
	s, err := auth.InitSecrets(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	m.cut()
	got, err := auth.LoadSecrets(dir)
	if err != nil {
		t.Fatalf("after a power cut: %v", err)
	}
	if !bytes.Equal(got.TicketKey, s.TicketKey) || !got.CACert.Equal(s.CACert) {
		t.Fatal("after a power cut the secrets differ")
	}
}

// TestVolumeInitSurvivesCut: a volume InitWith made opens after a power
// cut, with its config intact.
func TestVolumeInitSurvivesCut(t *testing.T) {
	m := mount(t)
	const bs = 64 << 10
	vol := m.path("vols/v1")
	cfg, err := datanode.InitWith(vol, "test", bs, 16*bs, datanode.PreallocFallocate)
	if err != nil {
		t.Fatal(err)
	}
	m.cut()
	st, err := datanode.OpenBlockStore(vol)
	if err != nil {
		t.Fatalf("after a power cut: %v", err)
	}
	defer st.Close()
	if st.Config != *cfg {
		t.Fatalf("config %+v, want %+v", st.Config, *cfg)
	}
}

// newCutVolume makes a volume of 16 blocks of bs bytes on m and opens it.
func newCutVolume(t *testing.T, m *testFS, bs uint32) (string, *datanode.BlockStore) {
	t.Helper()
	vol := m.path("vol")
	if _, err := datanode.InitWith(vol, "test", bs, 16*int64(bs), datanode.PreallocFallocate); err != nil {
		t.Fatal(err)
	}
	st, err := datanode.OpenBlockStore(vol)
	if err != nil {
		t.Fatal(err)
	}
	return vol, st
}

// TestGenerationsSurviveCut: block generations made durable by Sync
// survive a power cut; a block a new owner wrote (a newer generation)
// without Sync comes back whole as it was, data, checksum and generation
// together (they are in one file), never as the new data under the old
// generation.
func TestGenerationsSurviveCut(t *testing.T) {
	m := mount(t)
	const bs = 64 << 10
	vol, st := newCutVolume(t, m, bs)
	var err error
	block := func(c byte) []byte { return bytes.Repeat([]byte{c}, bs) }
	write := func(b uint64, c byte, gen uint64) {
		t.Helper()
		if err := st.Write(b, block(c), datanode.Checksum(block(c), bs), gen); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 'a', 10)
	write(1, 'b', 10)
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	// Block 1 gets a new owner (generation 20), not synced.
	write(1, 's', 20)
	st.Close()
	m.cut()
	if st, err = datanode.OpenBlockStore(vol); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	buf := make([]byte, bs)
	if _, err := st.Read(0, buf, 9); !errors.Is(err, auth.ErrTicketStale) {
		t.Errorf("synced block 0 read with an older ticket after the cut: %v", err)
	}
	if _, err := st.Read(0, buf, 10); err != nil || !bytes.Equal(buf, block('a')) {
		t.Errorf("synced block 0 after the cut: %v", err)
	}
	if _, err := st.Read(1, buf, 10); err == nil && !bytes.Equal(buf, block('b')) {
		t.Errorf("block 1, rewritten without sync, read with the old owner's ticket after the cut: %q...", buf[:8])
	}
}

// TestShortBlocksSurviveCut: a short block (written as its data rounded
// up to a page, the rest recorded as a zero tail) over a slot that held a
// whole block reads back as its data and zeros after a power cut that
// follows Sync: the tail entry is as durable as the data.
func TestShortBlocksSurviveCut(t *testing.T) {
	m := mount(t)
	const bs = 64 << 10
	vol, st := newCutVolume(t, m, bs)
	var err error
	full := bytes.Repeat([]byte{'x'}, bs)
	if err := st.Write(2, full, datanode.Checksum(full, bs), 10); err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	short := bytes.Repeat([]byte{'y'}, 100)
	if err := st.Write(2, short, datanode.Checksum(short, bs), 11); err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	m.cut()
	if st, err = datanode.OpenBlockStore(vol); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	buf := make([]byte, bs)
	want := make([]byte, bs)
	copy(want, short)
	if _, err := st.Read(2, buf, 11); err != nil || !bytes.Equal(buf, want) {
		t.Fatalf("short block after the cut: %v (first bytes %q, byte 5000 %q)", err, buf[:4], buf[5000])
	}
}
