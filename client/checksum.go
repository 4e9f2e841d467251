package client

import "github.com/plasmafs/plasma/internal/blockcrc"

// checksum is the CRC32C of a block of blocksize bytes that starts with
// data and is zero-padded (the datanode computes the same).
func checksum(data []byte, blocksize int) uint32 { return blockcrc.Checksum(data, blocksize) }
