package meta

import (
	"context"
)

// The store's types are its own, not the namenode protocol's: what they
// hold is durable (in the SQL tables and the commit log), and must mean
// the same to every later version of the program, whatever the protocol
// becomes. The namenode converts to them once, when it prepares a commit.

// Inode is an inode's durable attributes.
type Inode struct {
	Ino    uint64
	Type   InodeType
	Mode   uint32 // permission bits (07777)
	User   string
	Group  string
	Size   int64
	Nlink  uint32
	Mtime  int64 // Unix nanoseconds
	Ctime  int64
	Rep    uint8  // requested replication
	Seq    uint64 // bumped on every data change
	Target string // symlink target; a device node's number (decimal)
}

// InodeType is an inode's type. The values are durable: never renumber.
type InodeType uint8

// Inode types.
const (
	TypeFile InodeType = 1 + iota
	TypeDir
	TypeSymlink
	TypeFIFO
	TypeSocket
	TypeCharDevice
	TypeBlockDevice
)

// Extent maps file blocks Index..Index+Count-1 to a run of Count blocks on
// each replica.
type Extent struct {
	Index    uint64
	Count    uint32
	Replicas []Run
	CRC      []uint32 // CRC32C of each (zero-padded) block: Count of them
	Gen      uint64   // generation of the allocation that made the blocks (0: unknown)
}

// Run locates an extent's blocks on one datanode volume.
type Run struct {
	Node  uint32 // Datanode.ID
	Start uint64 // first block in the volume
}

// EntryKey names a directory entry.
type EntryKey struct {
	Parent uint64
	Name   string
}

// Entry is a directory entry.
type Entry struct {
	EntryKey
	Ino uint64
}

// Datanode is a datanode volume known to the cluster.
type Datanode struct {
	ID       uint32
	Identity string
	Blocks   uint64
	Enabled  bool
}

// RemovedDatanode is a datanode volume taken out of the cluster for good
// (plasma admin datanode remove): its id is never handed out again and
// its identity is refused if the volume comes back.
type RemovedDatanode struct {
	ID       uint32
	Identity string
}

// Snapshot is the whole metadata, as loaded at start-up.
type Snapshot struct {
	Inodes    []Inode
	Entries   []Entry
	Blocks    map[uint64][]Extent
	Datanodes []Datanode
	// Draining lists the datanodes being drained (their replicas moved
	// off; Change.Drains); Removed the datanodes removed for good.
	Draining []uint32
	Removed  []RemovedDatanode
	// InoLimit is the first inode number never handed out: numbers below it
	// may have been seen by clients and are never reused.
	InoLimit uint64
	// LogSeq is the last commit-log record the store holds (0: none).
	LogSeq uint64
}

// Change is what one committed transaction (or one namenode action) writes.
type Change struct {
	PutInodes  []Inode
	DelInodes  []uint64
	PutEntries []Entry
	DelEntries []EntryKey
	// Blocks replaces the whole block list of each inode named.
	Blocks   map[uint64][]Extent
	PutNodes []Datanode
	// Drains sets (true) or clears (false) each datanode's drain mark
	// (log format 2 and later).
	Drains map[uint32]bool
	// RemoveNodes deletes datanodes from the cluster for good, after
	// PutNodes and Drains (log format 2 and later).
	RemoveNodes []RemovedDatanode
	InoLimit    uint64 // raise the inode limit to this (0: unchanged)
	// Touch raises the mtime (and with it the ctime) of directories whose entries changed; it
	// needs no lock and must not overwrite other attributes.
	Touch map[uint64]int64
	// Journal: small writes made durable by this record of the commit log
	// (log format 3), to be applied again to the datanodes' blocks after
	// a crash (the namenode's journal.go). The store does not keep them:
	// Apply ignores them.
	Journal []JournalWrite
	// LogSeq records that the store now holds the namenode's commit log
	// up to this record (0: unchanged). Not part of the log's own records.
	LogSeq uint64
}

// JournalWrite is a journaled write: Data placed at Offset of file Ino's
// block Index, of allocation generation Gen, whose checksum (the whole
// block, zero-padded) is CRC once Data is in place.
type JournalWrite struct {
	Ino    uint64
	Index  uint64
	Gen    uint64
	Offset uint32
	CRC    uint32
	Data   []byte
}

// Store makes metadata durable. Implementations are used by one goroutine
// at a time (the namenode's committer).
type Store interface {
	// Load reads the whole metadata. A new store holds only the root
	// directory (inode 1).
	Load(ctx context.Context) (*Snapshot, error)
	// Apply writes all changes in one backend transaction and returns once
	// they are durable (in relaxed mode, once they are written). A
	// cancelled ctx leaves the transaction undone (an error, as any).
	Apply(ctx context.Context, changes []*Change) error
	Close() error
}

// Syncer is a store that can acknowledge changes before they are durable
// (relaxed mode) and make them durable on demand.
type Syncer interface {
	// Sync returns once every change applied so far is durable.
	Sync() error
}

// Namespacer is a store that knows the id of its namespace (made when the
// namespace was formatted; datanode volumes record it when they first
// join and refuse another one).
type Namespacer interface {
	Namespace() string
}

// Backuper is a store that can write a consistent copy of its metadata to
// a new file. Backup may be called while the committer applies changes:
// the store serialises the two.
type Backuper interface {
	Backup(dst string) error
}
