package blockcrc

import (
	"hash/crc32"
	"math/rand"
	"testing"
)

func naive(data []byte, blocksize int) uint32 {
	b := make([]byte, blocksize)
	copy(b, data)
	return crc32.Checksum(b, table)
}

func TestChecksumMatchesPaddedCRC(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, bs := range []int{4096, 65536, 1 << 20} {
		for _, n := range []int{0, 1, 63, 64, 4095, 4096, bs - 1, bs, rng.Intn(bs), rng.Intn(bs)} {
			data := make([]byte, n)
			rng.Read(data)
			if got, want := Checksum(data, bs), naive(data, bs); got != want {
				t.Fatalf("blocksize %d, %d data bytes: got %08x, want %08x", bs, n, got, want)
			}
		}
	}
}

func TestZeroExtendComposes(t *testing.T) {
	c := Update(0, []byte("plasma"))
	for _, n := range []uint64{1, 7, 1000, 1 << 20} {
		z := make([]byte, n)
		if got, want := ZeroExtend(c, n), Update(c, z); got != want {
			t.Fatalf("%d zeros: got %08x, want %08x", n, got, want)
		}
	}
	if ZeroExtend(c, 0) != c {
		t.Fatal("zero zeros changed the CRC")
	}
}

func FuzzChecksum(f *testing.F) {
	f.Add([]byte("abc"), uint16(100))
	f.Fuzz(func(t *testing.T, data []byte, pad uint16) {
		bs := len(data) + int(pad)
		if got, want := Checksum(data, bs), naive(data, bs); got != want {
			t.Fatalf("%d bytes + %d zeros: got %08x, want %08x", len(data), pad, got, want)
		}
	})
}

func BenchmarkChecksum64Of1MiB(b *testing.B) {
	data := make([]byte, 64)
	for i := 0; i < b.N; i++ {
		Checksum(data, 1<<20)
	}
}

// TestPlaced: replacing a region of a block changes its checksum by the
// checksums of the old and new regions placed alone.
func TestPlaced(t *testing.T) {
	const bs = 1 << 16
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		blk := make([]byte, bs)
		n := rng.Intn(bs)
		for k := 0; k < n; k++ {
			blk[k] = byte(rng.Uint32())
		}
		off := rng.Intn(bs)
		l := rng.Intn(bs - off + 1)
		old := append([]byte(nil), blk[off:off+l]...)
		nw := make([]byte, l)
		for k := range nw {
			nw[k] = byte(rng.Uint32())
		}
		before := Checksum(blk, bs)
		copy(blk[off:], nw)
		want := Checksum(blk, bs)
		if got := before ^ Placed(off, old, bs) ^ Placed(off, nw, bs); got != want {
			t.Fatalf("off %d len %d: %08x, want %08x", off, l, got, want)
		}
	}
}
