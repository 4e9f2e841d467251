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
// reusable (freeQueue, frees.go) and the inode-number counter
// (inoCounter, inos.go). None has a mutex of its own: all are
// guarded by Namenode.mu, which every request holds while it reads or
// changes them, so a request sees them consistent with each other. The
// committer (committer, committer.go) batches commits and decides syncs
// and answers; it writes through the namenode (nnStore, commit.go), which
// applies written batches under Namenode.mu; with a commit log, the
// checkpointer (checkpointer.go, its own lock) applies logged batches to
// the store in the background. Fsck is a checker (fsck.go)
// over the namespace and the datanode registry, under Namenode.mu. The
// RPC server (rpcServer, rpcserver.go) does connections, framing,
// handshakes and dispatch; it calls the namenode's requestHandler methods
// (server.go), which run requests through the operation table (ops.go)
// under Namenode.mu. The ~40 operation handlers remain Namenode methods,
// grouped by what they work on (ops_names.go, ops_attrs.go, ops_blocks.go,
// ops_admin.go): each reads and changes several of the parts above under
// the one lock. Directory leases (dirLeases, leases.go) say which client
// may answer "no such name" in a directory itself; a request that would
// add a name there waits (retryAfter) in its own goroutine, outside the
// lock.
package namenode
