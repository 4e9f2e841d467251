// Package kv is Plasma KV: a transactional key/value database stored in
// PlasmaFS files, with one writer and any number of readers.
//
// A database is a PlasmaFS directory holding two files: "kv", the
// database file, and "lock", an empty file that the writer locks. Keys are
// byte strings up to a limit fixed at creation (Create's MaxKeyLength);
// values are byte strings of any size, streamed in and out (PutReader,
// Value), never held whole in memory. Keys are kept in byte order, so
// scans by prefix and range (Scan, Count) are cheap.
//
// Concurrency rides on PlasmaFS transactions and copy-on-write blocks:
//
//   - A reader works on a Snapshot: one committed version of the database
//     file, opened in a PlasmaFS transaction, which keeps that version's
//     blocks readable however many commits follow. Readers never take
//     locks, never wait for the writer and never see a mixed state. A DB
//     holds a current snapshot; Refresh (or Options.RefreshInterval)
//     replaces it with the newest version, and reads already running
//     finish on the old one.
//   - The one Writer (DB.Begin) changes the lock file's mtime in its
//     transaction, so a second writer (or a vacuum) fails at once with
//     ErrLocked; PlasmaFS never makes anybody wait. A batch of Put and
//     Delete calls becomes visible atomically at Commit, as one PlasmaFS
//     transaction. A writer killed at any moment leaves the previous
//     version intact: its transaction is aborted, and the blocks it wrote
//     are never referenced.
//   - Vacuum rewrites the live data into a new file and renames it over the
//     old one, reclaiming the space of replaced and deleted values without
//     blocking readers; snapshots of the old file keep reading it.
//
// The file format is an append-only log of values and copy-on-write B+-tree
// nodes ending with a trailer that names the root (see the design notes,
// docs/design.md, "Plasma KV"). Once a snapshot is open, lookups need no
// namenode request: the block list came with the file. A lookup reads the
// nodes on the path from the root (cached, decoded, in memory after the
// first use) and the value's block(s); blocks below the file's sealed
// offset are never rewritten, so they stay cached across refreshes.
//
// Small commits do not rewrite whole blocks: PlasmaFS never overwrites a
// block in place, so appending to a file whose last block is partly
// filled would read that block and write it again, up to a whole block
// per commit. A small commit therefore starts at the next block boundary,
// writing only its own bytes; every Options.TailCommits small commits (and
// every large one) compact this tail: the live data of the small commits
// is moved down to the sealed offset, rewriting the one block there, and
// their padding is reclaimed.
package kv
