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
