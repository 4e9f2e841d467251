// Package client is the native Go API of PlasmaFS.
//
// A Client holds one connection to the namenode and is shared by any
// number of goroutines; connect with New and a Config, usually from
// LoadConfig, which reads ~/.plasmafs or the environment
// ($PLASMAFS_CLUSTER, $PLASMAFS_NAMENODES) like the plasma command does.
//
// All access happens in transactions. Begin opens one (it costs nothing
// until used); Commit makes its changes durable and visible atomically,
// CommitAsync visible at once and durable shortly after, Abort drops them.
// Client.Txn runs a function in a transaction and runs it again when
// another transaction holds a conflicting lock (ErrConflict): PlasmaFS
// never makes a writer wait.
//
// Files are read and written through File (Txn.Open, Txn.CreateFile),
// which implements io.Reader, io.ReaderAt, io.Writer, io.WriterAt,
// io.Seeker and io.WriterTo. The client moves the data itself: it fetches
// a file's whole block list in one namenode call and then reads blocks
// straight from the datanodes (from the local datanode's block file when
// there is one), checking every block's CRC32C and falling back to another
// replica on error. Writes go to newly allocated blocks along a chain of
// datanodes and become visible at commit. Client.CopyIn streams a reader
// into a new file.
//
// Errors match the sentinels (ErrNotFound, ErrExists, ErrConflict, …) and
// their io/fs equivalents with errors.Is; ConnLost and Unreachable tell
// what a lost namenode connection means for a request.
package client
