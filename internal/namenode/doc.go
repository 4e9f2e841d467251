// Package namenode is the PlasmaFS metadata service.
//
// All metadata lives in memory (inodes, directories, block lists, the block
// allocation maps and the datanode registry); a meta.Store makes committed
// changes durable. Clients open any number of transactions on one
// connection. A transaction works on private copies of what it changes and
// holds locks on the inodes and directory entries it writes; a second writer
// gets ErrCodeConflict at once. Commit hands the transaction's changes to the
// committer, which writes many transactions in one store transaction (group
// commit) and applies them to memory only after the store reports them
// durable. Blocks a commit frees are reused only when no transaction that
// could still read them is open.
//
// Parts with their own types and unit tests: the namespace table with
// each transaction's uncommitted changes as an overlay (namespace,
// namespace.go and paths.go), the lock manager (lockTable, locks.go), the
// transaction manager (txnTable, txns.go), the block allocator
// (blockAllocator, allocator.go, over the blockMap of alloc.go), the
// datanode registry (nodeRegistry, nodes.go), the blocks waiting to be
// reusable (freeQueue, frees.go), the inode-number counter (inoCounter,
// inos.go) and the directory leases (dirLeases, leases.go). None has a
// mutex of its own: all are guarded by Namenode.mu, which every request
// holds while it reads or changes them, so a request sees them consistent
// with each other.
//
// Parts with goroutines and locks of their own: the committer (committer,
// committer.go) batches commits and decides syncs and answers, never
// holding Namenode.mu; it writes through the namenode (nnStore,
// commit.go), whose methods take Namenode.mu to apply a written batch.
// With a commit log, the checkpointer (checkpointer, checkpointer.go)
// owns the log: the committer appends and syncs through it, its goroutine
// applies logged batches to the store, and the log starts over only once
// the store holds it durably; its mutex guards only its queue and
// progress, and it takes no other lock itself (a store error calls the
// namenode's fatal, which stops the committer and closes connections). The RPC server (rpcServer,
// rpcserver.go) does connections, framing, handshakes and dispatch, with
// its own lock over its listeners and connections; it calls the namenode's
// requestHandler methods (server.go). Fsck is a checker (fsck.go) over the
// namespace and the datanode registry, under Namenode.mu.
//
// Requests: every request runs through the operation table (ops.go)
// under Namenode.mu; the dispatcher makes the checks each entry's flags
// ask for (outside a transaction, needs one, datanodes only, superuser
// only, inode reachable). Commit, sync, registration and backup wait for
// the store: their entries hand the server a function that answers the
// request itself once the lock is released (answersLater). The ~40
// handlers remain Namenode methods, grouped by what they work on
// (ops_names.go, ops_attrs.go, ops_blocks.go, ops_admin.go; leases.go for
// leasedir): each reads and changes several of the parts above under the
// one lock. Checks several handlers make are one function each: perm.go
// (may, reach, needDir, checkSticky), ops_names.go (atDir, claimEntry,
// lockEmptyDir), ops_blocks.go (mayWriteFile, checkSize). A request that
// would add a name in a directory another client holds a lease on waits
// (retryAfter) in its own goroutine, outside the lock.
package namenode
