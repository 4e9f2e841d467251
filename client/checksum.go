package client

import "hash/crc32"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var zeroBlock = make([]byte, 1<<20)

// checksum is the CRC32C of a block of blocksize bytes that starts with
// data and is zero-padded (the datanode computes the same).
func checksum(data []byte, blocksize int) uint32 {
	c := crc32.Update(0, castagnoli, data)
	for pad := blocksize - len(data); pad > 0; {
		n := min(pad, len(zeroBlock))
		c = crc32.Update(c, castagnoli, zeroBlock[:n])
		pad -= n
	}
	return c
}
