// Package datanode stores fixed-size blocks for PlasmaFS and serves them
// over the data protocol (package wire). A datanode knows nothing of files:
// it reads and writes the blocks it is told to, keeps a CRC32C per block,
// verifies checksums on every write and read, forwards writes along a
// replica chain, and makes writes durable when a client asks (before a
// commit that references them).
//
// A volume directory holds "config" (identity, cluster, blocksize, size,
// layout) and "data": all blocks, preallocated, followed by one 16-byte
// entry per block (its CRC32C, bound to its generation; the generation of
// the ticket that last wrote it; how much of its end is zeros not on
// disk). See BlockStore. Volumes from before that layout kept the entries
// in the files "crc", "gen" and "tail"; opening one converts it.
package datanode
