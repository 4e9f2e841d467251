// Package vfs is the one place that knows file semantics for PlasmaFS
// frontends (the FUSE mount in internal/fusefs, the NFSv3 bridge in
// internal/nfsbridge), the way JuiceFS's pkg/vfs serves its FUSE and
// gateway frontends: operations addressed by inode and name, a handle
// table, which transaction a syscall runs in and when it commits,
// attribute and entry caching, and errno mapping (Errno). Frontends
// translate their protocol's requests into these calls and nothing more.
//
// # Transactions
//
// Namespace and attribute operations (lookup, mkdir, create, unlink,
// rename, link, symlink, setattr, readdir pages) run in a transaction that
// commits with its one request (clientx.Auto): one round trip each. They
// commit Async by default (visible to every client at once, durable within
// the namenode's window or at the next Sync), Durable with Options.Sync.
// An operation that meets another transaction's lock is tried again with
// backoff for a few seconds, then fails with EBUSY.
//
// # A namenode restart
//
// Every operation waits for a namenode it lost (up to unreachableWait),
// as an NFS hard mount does. Metadata operations are sent again; one whose
// answer was lost and that finds its change made (the name there, or gone)
// counts as done. An open file whose transaction the namenode lost opens
// again in a new one, which makes the lost one's writes and size changes
// again (up to maxRedo bytes of writes since the last commit; beyond that
// they are lost, EIO); a commit whose answer was lost is made again too
// (the same changes over the version committed since give the same file).
// Creates and block allocations that the restarted namenode refuses until
// its datanodes register again are waited for by the client library
// (client.Config.AllocWait), as for every other frontend.
//
// # Open files
//
// All handles of one regular file in one VFS share one state (as the
// kernel's page cache is shared by all descriptors of a file): a
// transaction with the file open (client.File), begun at the first read
// or write. Reads and writes of every handle go through it, so the mount
// reads its own writes at once, whichever descriptor wrote them. Writes
// are buffered in whole blocks by the client library and written to the
// datanodes in the background.
//
//   - Flush (every close(2)) commits the transaction if it wrote or
//     truncated anything (Async), so data is visible to other clients once
//     close returns; a clean file's flush costs nothing.
//   - Fsync commits it Durable (or, with nothing to commit, waits for
//     Client.Sync), so it returns once the file's data and every earlier
//     operation of any client are durable. Sync (syncfs) does that for
//     every open file.
//   - After a commit the next read or write begins a new transaction, which
//     sees the latest committed data. Opening a file whose state holds only
//     a read transaction ends it too (close-to-open consistency); a reader
//     that keeps its descriptor open reads the version it started with
//     until the mount itself writes, commits or reopens the file.
//   - Concurrent writers of one file in different mounts (or clients): the
//     first to commit wins; the other's commit (or write, once its data
//     reaches the namenode) fails with EBUSY and its data since its last
//     commit is lost, as the namenode guarantees first-committer-wins on
//     file data. Writers within one mount share the state and do not
//     conflict.
//   - chmod, chown, utimes, link, rename over and unlink of a file open
//     with uncommitted data first commit that data (its transaction holds
//     the inode). A size change of an open file happens in its transaction.
//   - Unlinking (or renaming over) a file open in this mount keeps its
//     transaction open ("pins" it), and the namenode keeps an unlinked file
//     for the transactions that use it: the handles go on reading and
//     writing. Once that transaction commits, the file is gone for the
//     mount too (ESTALE).
//   - The last Release ends the transaction (aborting a read-only one).
//   - Transactions of open files stay alive as long as the client does
//     (client keepalive, ticket refresh): a file may stay open for hours.
//
// # Caching
//
// Attributes and directory entries are cached for Options.TTL (default
// 1s), which frontends also give the kernel or NFS client. What this VFS
// changes it updates or drops in its cache at once; changes of other
// clients show within the TTL. Negative lookups are not cached, except
// in a directory this mount holds a lease on (leases.go): there Lookup
// answers an absent name itself with an AbsentError, which a frontend may
// cache until shortly before the lease ends (NegativeTimeout), since no
// other client adds a name before. A directory whose names are looked up
// at the namenode one after another is listed with attributes instead
// (scan.go), cached for the same TTL. Attributes of a file with
// uncommitted writes show the size and mtime of those writes.
// A listing read in several calls (with attributes) fetches its rest again
// when this mount changed something since: frontends hand those
// attributes on as current.
//
// # Owners
//
// PlasmaFS owners are names. They map to local ids through the local user
// and group database; names without a local id show as Nobody (65534),
// and a name made of digits is that number. New files belong to the
// mount's credential (the namenode checks every operation against it);
// Access checks mode bits for the local caller.
package vfs
