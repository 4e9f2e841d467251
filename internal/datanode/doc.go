// Package datanode stores fixed-size blocks for PlasmaFS and serves them
// over the data protocol (package wire). A datanode knows nothing of files:
// it reads and writes the blocks it is told to, keeps a CRC32C per block,
// verifies checksums on every write and read, forwards writes along a
// replica chain, and makes writes durable when a client asks (before a
// commit that references them).
//
// A volume directory holds "config" (identity, cluster, blocksize, size),
// "data" (all blocks, preallocated), "crc" (one CRC32C per block, bound to
// the block's generation) and "gen" (the generation of the ticket that last
// wrote each block; see BlockStore).
package datanode
