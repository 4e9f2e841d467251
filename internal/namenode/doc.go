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
package namenode
