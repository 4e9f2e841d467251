// Package meta is the namenode's durable metadata store: inodes, directory
// entries, block lists (as extents), datanodes and counters, in SQL tables
// that are the same on every backend.
//
// The namenode keeps all metadata in memory and uses a Store only to load it
// at start-up and to make committed changes durable. Apply receives the
// changes of many transactions at once (group commit) and must make all of
// them durable in one backend transaction before it returns: the namenode
// acknowledges commits only after Apply succeeds.
package meta
