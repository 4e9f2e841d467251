// Package blockcrc computes the checksum every PlasmaFS block carries: the
// CRC32C of the block zero-padded to the blocksize. Clients compute it
// before they write, datanodes when they store and read. Most blocks of
// small files and the last block of every file are mostly padding, so the
// padding is not run through the CRC byte by byte: appending n zero bytes
// is a linear map of the CRC register, applied here as a product of
// precomputed matrices (one per power of two), in O(log n) instead of
// O(n). A 64-byte block of a 1 MiB-block cluster costs what 64 bytes cost.
package blockcrc

import (
	"hash/crc32"
	"math/bits"
)

var table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C of a block of blocksize bytes that begins
// with data and is zero after it (len(data) ≤ blocksize).
func Checksum(data []byte, blocksize int) uint32 {
	c := crc32.Update(0, table, data)
	if pad := blocksize - len(data); pad > 0 {
		c = ZeroExtend(c, uint64(pad))
	}
	return c
}

// Placed returns the checksum of a block of blocksize bytes that is zero
// except for part at offset off. The checksum is affine in the block's
// bits, so for blocks a, b and c of one size Checksum(a^b^c) is
// Checksum(a)^Checksum(b)^Checksum(c): replacing bytes in a block whose
// checksum is known needs only the old and the new bytes, through Placed.
func Placed(off int, part []byte, blocksize int) uint32 {
	c := crc32.Update(ZeroExtend(0, uint64(off)), table, part)
	return ZeroExtend(c, uint64(blocksize-off-len(part)))
}

// Update is crc32.Update with the Castagnoli table.
func Update(c uint32, p []byte) uint32 { return crc32.Update(c, table, p) }

// ZeroExtend returns the CRC32C of the message whose CRC32C is c followed
// by n zero bytes.
func ZeroExtend(c uint32, n uint64) uint32 {
	// The register (the complement of the CRC) goes through one linear
	// map per zero byte; powers[k] is that map applied 2^k times.
	s := ^c
	for n != 0 {
		k := bits.TrailingZeros64(n)
		s = powers[k].apply(s)
		n &= n - 1
	}
	return ^s
}

// matrix is a linear map of 32-bit registers over GF(2): column i is the
// image of bit i.
type matrix [32]uint32

func (m *matrix) apply(v uint32) uint32 {
	var out uint32
	for i := 0; v != 0; i++ {
		if v&1 != 0 {
			out ^= m[i]
		}
		v >>= 1
	}
	return out
}

// square returns m applied twice.
func (m *matrix) square() matrix {
	var out matrix
	for i := range out {
		out[i] = m.apply(m[i])
	}
	return out
}

var powers [64]matrix

func init() {
	// One zero byte: the register s becomes table[s&0xff] ^ s>>8.
	for i := range powers[0] {
		s := uint32(1) << i
		powers[0][i] = table[s&0xff] ^ s>>8
	}
	for k := 1; k < len(powers); k++ {
		powers[k] = powers[k-1].square()
	}
}
