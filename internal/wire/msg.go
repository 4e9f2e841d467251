package wire

// Op names a namenode operation.
type Op uint8

const (
	OpInvalid      Op = iota
	OpCommit          // make the transaction durable and end it
	OpAbort           // end the transaction, discarding its changes
	OpLookup          // resolve Path to an inode (Flags&FlagNoFollow: do not follow a final symlink)
	OpStat            // attributes of inode Ino
	OpCreate          // create Path of type Type (file, dir, symlink with target Path2)
	OpReadDir         // entries of directory Ino (or Path when Ino is 0) after name Path2, at most Count; Counters[0]=1: more follow
	OpSetAttr         // change the attributes named by Flags on Ino
	OpRename          // move Path to Path2
	OpLink            // hard link: new name Path2 for existing Path
	OpUnlink          // remove the name Path (Flags&FlagDir: it must be an empty directory)
	OpBlocks          // the whole block list of Ino, plus the datanodes it names
	OpAllocate        // allocate blocks Index..Index+Count-1 of Ino for writing
	OpSetBlocks       // attach written blocks (Extents with checksums) to Ino; Size is the new size
	OpGlob            // expand the pattern Path to matching paths after Path2, at most Count; Counters[0]=1: more follow
	OpFsStat          // filesystem totals
	OpStats           // namenode counters
	OpRegister        // a datanode announces itself (Node); a sparse one also its slots holding pages (Extents, Index SlotHolds or SlotKept)
	OpHeartbeat       // a datanode is alive (Node.ID, Node.Used); its scrubber's last full pass (Mtime ns, Count blocks verified) and current position (Index); the release batch it acknowledges (Size) and the slots of it kept (Extents, Index SlotKept)
	OpNodes           // list datanodes
	OpFsck            // metadata self-check; returns problems and every file's block list
	OpPing            // no-op round trip
	OpDropReplicas    // drop this transaction's new replicas on the datanodes named in Pref (they failed)
	OpKeepalive       // keep every transaction of this connection alive; returns [txn timeout ns, ticket lifetime ns]
	OpBackup          // superuser: write a consistent copy of the metadata to Path on the namenode's host
	OpSync            // answer once everything acknowledged before it is durable
	OpPathOf          // a path of inode Ino (for file handles that outlive renames and restarts)
	OpLeaseDir        // lease directory Ino: Counters [term ns (0: refused), 1: new lease with its names in Paths]
	OpExtend          // append tickets for block Index of Ino, its committed partial last block: Extents[0], Counters [its committed length]
	OpDelegate        // a credential delegated for job Path, for public key Path2 (PEM), valid Size ns: Paths[0] its chain (PEM)
	OpNodeAdmin       // superuser: datanode operations (Path: status, drain, disable, enable; Index: datanode id); see namenode/nodeadmin.go
	OpBadBlock        // datanode Node: its block Index fails its recorded checksum Count (the scrubber found it)
	// OpReplicaDamaged: a reader found the replica Extents[0].Replicas[0]
	// of block Index of Ino failing the committed checksum
	// Extents[0].CRC[0]; the namenode has its datanode verify it.
	OpReplicaDamaged
	OpNamenodes // this namenode's place in its group, answered by every member: Paths [member id, role, leader's address], Counters [term, applied index, last log index, commit index]
	opMax
)

var opNames = [...]string{"invalid", "commit", "abort", "lookup", "stat", "create", "readdir",
	"setattr", "rename", "link", "unlink", "blocks", "allocate", "setblocks", "glob", "fsstat",
	"stats", "register", "heartbeat", "nodes", "fsck", "ping", "dropreplicas", "keepalive", "backup", "sync", "pathof", "leasedir", "extend", "delegate", "nodeadmin", "badblock", "replicadamaged", "namenodes"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// NumOps is the number of defined operations (for per-op counters).
const NumOps = int(opMax)

// Flags for requests.
const (
	FlagNoFollow = 1 << iota // Lookup/Stat: do not follow a final symlink
	FlagDir                  // Unlink: remove a directory
	FlagMode                 // SetAttr: set Mode
	FlagOwner                // SetAttr: set User; Create: owner User (superusers only)
	FlagGroup                // SetAttr: set Group; Create: group Group (superusers only)
	FlagMtime                // SetAttr: set Mtime
	FlagSize                 // SetAttr: set Size (truncate or extend)
	FlagRep                  // SetAttr: set replication
	FlagParents              // Create dir: create missing parents, no error if it exists
	FlagExcl                 // Create: fail if the name exists (default for files: open existing)
	FlagBegin                // the request begins transaction Txn (an unknown Txn without it is refused)
	FlagBlocks               // Lookup/Stat: also return the block list of the same committed version
	FlagPlus                 // ReadDir: also return every entry's attributes
	FlagAt                   // Path (Path2) is one name in directory Ino (Ino2), not a path: lookup, create, unlink, rename, link
	FlagCommit               // commit the transaction after this request succeeds, in the same round trip
	FlagAsync                // Commit, FlagCommit: acknowledge once applied, durable within the namenode's window
	// FlagUnsyncedData (Commit, FlagCommit): the datanodes have not synced
	// the transaction's data; the namenode has them sync before the log
	// fsync that makes the commit durable (with FlagAsync), or journals it
	// (a durable commit whose data is all in Journal, journal.go).
	FlagUnsyncedData
)

// BlocksIncluded in Counters[0] of the answer to a Lookup or Stat with
// FlagBlocks says the block list is included (a file the caller may not
// read is opened without it).
const BlocksIncluded = 1

// FileType is the type of an inode.
type FileType uint8

const (
	TypeFile FileType = 1 + iota
	TypeDir
	TypeSymlink
	// Special files: they have no data in PlasmaFS (a FIFO or socket is
	// the kernel's business on each client; a device node names a device
	// of the machine that opens it). A device's number (Linux dev_t) is
	// kept as the decimal Target.
	TypeFIFO
	TypeSocket
	TypeCharDevice
	TypeBlockDevice
)

func (t FileType) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "directory"
	case TypeSymlink:
		return "symlink"
	case TypeFIFO:
		return "fifo"
	case TypeSocket:
		return "socket"
	case TypeCharDevice:
		return "character device"
	case TypeBlockDevice:
		return "block device"
	}
	return "unknown"
}

// Attr holds an inode's attributes.
type Attr struct {
	Ino       uint64
	Type      FileType
	Mode      uint32 // permission bits
	User      string
	Group     string
	Size      int64
	Nlink     uint32
	Mtime     int64 // unix nanoseconds
	Ctime     int64
	Rep       uint8  // requested replication
	Blocksize uint32 // filesystem blocksize
	Seq       uint64 // bumped on every data change
	Target    string // symlink target
}

// DirEntry is one name in a directory.
type DirEntry struct {
	Name string
	Ino  uint64
	Type FileType
	Attr *Attr // ReadDir with FlagPlus only
}

// Run locates Count consecutive blocks (the extent's count) on one datanode.
type Run struct {
	Node  uint32 // datanode number
	Start uint64 // first block in that datanode's block store
}

// Extent maps file blocks Index..Index+Count-1 to a run of blocks on each
// replica. CRC has one CRC32C per block (of the full, zero-padded block) once
// the blocks are written; it is empty in an allocation.
type Extent struct {
	Index    uint64
	Count    uint32
	Replicas []Run
	CRC      []uint32
	// Tickets, one per replica, let the client read (or, in an
	// allocation, write) these blocks on the datanodes. Only in responses.
	Tickets [][]byte
	// Gen is the generation of the allocation that made these blocks
	// (0: unknown, older data): their datanodes hold it once the blocks
	// are written, and read tickets require it, so blocks attached
	// without being written never yield their previous owner's data.
	Gen uint64
}

// NodeInfo describes a datanode.
type NodeInfo struct {
	ID        uint32
	Identity  string
	Cluster   string
	Addr      string // data protocol TCP address
	Socket    string // Unix socket for local short-circuit reads ("" if none)
	Host      string // host name, to tell local nodes
	Blocksize uint32
	Blocks    uint64 // capacity
	Used      uint64
	Alive     bool
	Enabled   bool
	// Namespace is the namespace id: in a registration, the one the volume
	// recorded when it first joined ("" for a volume that never joined);
	// in the answer, the namenode's, for the volume to record.
	Namespace string
	// Capacity and UsedBytes: a sparse volume's bytes, in registrations
	// and heartbeats (0 and 0 for a volume of fixed slots, whose Blocks
	// are its space); in the namenode's lists, every datanode's, in bytes.
	Capacity  uint64
	UsedBytes uint64
}

// States of a sparse datanode's slots, in the Index of the one-replica
// extents it sends with its registration (every slot holding pages) and
// with the acknowledgement of a release batch (the slots it kept).
const (
	SlotHolds = 0 // holds a block's pages
	SlotKept  = 1 // empty, keeping a released block's pages for reuse
)

// Request is one namenode call. Unused fields stay zero and cost one bit.
type Request struct {
	Op      Op
	Txn     uint64
	Ino     uint64
	Flags   uint32
	Path    string
	Path2   string
	Type    FileType
	Mode    uint32
	User    string
	Group   string
	Size    int64
	Mtime   int64
	Rep     uint8
	Index   uint64
	Count   uint64
	Extents []Extent
	Pref    []string
	Node    *NodeInfo
	Ino2    uint64 // FlagAt: directory of Path2 (rename, link)
	// ReqID names the client's transaction (or lone request) in the logs
	// of the namenode and the datanodes (0: none); see FormatReqID.
	ReqID uint64
	// Journal: the small in-place writes of this request's file that the
	// commit journals (journal.go).
	Journal []JournalWrite
}

// Code is an error code carried in a response.
type Code uint8

const (
	OK Code = iota
	ErrCodeNotFound
	ErrCodeExists
	ErrCodeNotDir
	ErrCodeIsDir
	ErrCodeNotEmpty
	ErrCodeConflict
	ErrCodeInvalid
	ErrCodeNoSpace
	ErrCodePerm
	ErrCodeTxn
	ErrCodeUnavailable
	ErrCodeNameTooLong
	ErrCodeLoop
	ErrCodeInternal
	// ErrCodeNotLeader: a namenode of a group that is not its leader
	// answers every request so; Paths[0] is the leader's address when it
	// knows one (NotLeaderAddr).
	ErrCodeNotLeader
)

// SpaceFreeing is in the message of an ErrCodeUnavailable allocation that
// blocks being freed (files removed or rewritten a moment ago) would
// satisfy: clients wait it out like a datanode's registration.
const SpaceFreeing = "are being freed"

// Response answers a Request.
type Response struct {
	Code     Code
	Msg      string
	Attr     *Attr
	Entries  []DirEntry
	Extents  []Extent
	Nodes    []NodeInfo
	Paths    []string
	Counters []uint64
	Problems []string
	Files    []FileBlocks
	// Journal: a registration's writes to apply before taking others
	// (journal.go).
	Journal []JournalWrite
}

// FileBlocks is one file's block list, as returned by fsck.
type FileBlocks struct {
	Path    string
	Size    int64
	Rep     uint8
	Extents []Extent
}
