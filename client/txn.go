package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// Protocol limits: names, paths and replication beyond them are refused.
const (
	MaxNameLen     = wire.MaxName    // bytes in one path component
	MaxPathLen     = wire.MaxPath    // bytes in a whole path
	MaxReplication = wire.MaxReplica // replicas of a file's blocks
)

// FileType tells files, directories and symbolic links apart.
type FileType uint8

// File types.
const (
	TypeFile FileType = 1 + iota
	TypeDir
	TypeSymlink
	TypeFIFO        // named pipe (no data in PlasmaFS)
	TypeSocket      // Unix socket name (no data in PlasmaFS)
	TypeCharDevice  // device node: FileInfo.Rdev names the device
	TypeBlockDevice // device node: FileInfo.Rdev names the device
)

// The client's file types are the protocol's (checked at compile time).
var (
	_ [0]struct{} = [FileType(wire.TypeFile) - TypeFile]struct{}{}
	_ [0]struct{} = [FileType(wire.TypeDir) - TypeDir]struct{}{}
	_ [0]struct{} = [FileType(wire.TypeSymlink) - TypeSymlink]struct{}{}
	_ [0]struct{} = [FileType(wire.TypeBlockDevice) - TypeBlockDevice]struct{}{}
)

// UnixMode turns Unix mode bits (07777) into an fs.FileMode: the
// permissions plus fs.ModeSetuid, fs.ModeSetgid and fs.ModeSticky.
func UnixMode(bits uint32) fs.FileMode {
	m := fs.FileMode(bits & 0o777)
	if bits&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if bits&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if bits&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// UnixBits is the inverse of UnixMode.
func UnixBits(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

func (t FileType) String() string { return wire.FileType(t).String() }

// FileInfo holds an inode's attributes.
type FileInfo struct {
	Ino       uint64
	Type      FileType
	Mode      fs.FileMode // permission bits, setuid, setgid and sticky
	User      string
	Group     string
	Size      int64
	Nlink     uint32
	Mtime     time.Time
	Ctime     time.Time
	Rep       int    // requested replication
	Blocksize int    // filesystem blocksize
	Seq       uint64 // data version, bumped on every data change
	Target    string // symlink target
	Rdev      uint64 // device nodes: the device number (Linux dev_t)
}

// IsDir reports whether the inode is a directory.
func (fi FileInfo) IsDir() bool { return fi.Type == TypeDir }

func infoOf(a *wire.Attr) FileInfo {
	if a == nil {
		return FileInfo{}
	}
	fi := FileInfo{Ino: a.Ino, Type: FileType(a.Type), Mode: UnixMode(a.Mode), User: a.User, Group: a.Group, Size: a.Size,
		Nlink: a.Nlink, Mtime: time.Unix(0, a.Mtime), Ctime: time.Unix(0, a.Ctime), Rep: int(a.Rep),
		Blocksize: int(a.Blocksize), Seq: a.Seq, Target: a.Target}
	if fi.Type == TypeCharDevice || fi.Type == TypeBlockDevice {
		// The protocol keeps a device's number as its decimal target.
		fi.Rdev, _ = strconv.ParseUint(a.Target, 10, 64)
		fi.Target = ""
	}
	return fi
}

// DirEntry is one name in a directory.
type DirEntry struct {
	Name string
	Ino  uint64
	Type FileType
	Info FileInfo // ReadDirPlus only
}

// Txn is a transaction. Its operations must be called one at a time (a Txn
// is not for concurrent use); use several transactions for parallelism.
// Reads see committed data; a file's block list, once read, stays readable
// until the transaction ends.
type Txn struct {
	c     *Client
	id    uint64
	gen   uint64 // namenode connection generation of the first request
	used  bool
	ended bool
	auto  bool // clientx.Auto: the first request commits (compound)
	async bool // commit acknowledged once applied (Async)
	// begun is closed once the request that begins the transaction on the
	// namenode has been answered; a request racing it (a file's
	// background flush) waits, as the namenode refuses unknown ids.
	begun chan struct{}
	mu    sync.Mutex
	files []*File
	nodes map[string]bool // datanode addresses written to (synced before commit)
	// singleCopy: a block was written with one replica. Its commit does not
	// defer the datanode's sync: had that one datanode failed its sync at
	// the namenode's durability point, no replica would be left to strike
	// it to, and the namenode would have to stop (datasyncstrike.go).
	singleCopy bool
	// journaled: bytes written by extensions the commit may journal;
	// unjournaled: something else was written (journal.go).
	journaled   int
	unjournaled bool
	// owner, group: whom the *At calls create for (clientx.CreateAs).
	owner, group string
}

// createReq fills in the owner of a create request.
func (tx *Txn) createReq(q *wire.Request) *wire.Request {
	q.User, q.Group = tx.c.cfg.User, tx.c.cfg.Group
	if tx.owner != "" {
		q.User = tx.owner
		q.Flags |= wire.FlagOwner
	}
	if tx.group != "" {
		q.Group = tx.group
		q.Flags |= wire.FlagGroup
	}
	return q
}

// ID returns the transaction id.
func (tx *Txn) ID() uint64 { return tx.id }

// reqID is the transaction's request id in the logs of the namenode and
// the datanodes (wire.FormatReqID).
func (tx *Txn) reqID() uint64 { return tx.c.reqID(tx.id) }

// call sends q in the transaction; a request that places data refused
// for want of live datanodes waits for them (allocwait.go).
func (tx *Txn) call(ctx context.Context, q *wire.Request) (*wire.Response, error) {
	r, err := tx.callOnce(ctx, q)
	if err != nil && waitsForDatanodes(q, err) {
		return tx.waitForDatanodes(ctx, q, err)
	}
	return r, err
}

// callOnce sends q once in the transaction.
func (tx *Txn) callOnce(ctx context.Context, q *wire.Request) (*wire.Response, error) {
	if tx.ended {
		return nil, fmt.Errorf("%w: transaction %d already ended", ErrTxn, tx.id)
	}
	q.Txn = tx.id
	q.ReqID = tx.reqID()
	tx.autoFlags(q)
	if q.Op == wire.OpCommit && tx.async {
		q.Flags |= wire.FlagAsync
	}
	nn, gen := tx.c.conn()
	tx.mu.Lock()
	first := !tx.used
	if first {
		tx.used, tx.gen = true, gen
		tx.begun = make(chan struct{})
		q.Flags |= wire.FlagBegin
	}
	lost := tx.gen != gen
	begun := tx.begun
	tx.mu.Unlock()
	if lost {
		return nil, fmt.Errorf("%w: %w: transaction %d was aborted when the namenode connection was lost", ErrTxn, ErrConnLost, tx.id)
	}
	if first {
		defer close(begun)
	} else {
		select {
		case <-begun:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r, err := nn.Call(ctx, q)
	// The first request of a transaction may be sent again on a new
	// connection when nothing of the transaction can exist on the
	// namenode: it never left, or it was a read (the transaction holds
	// nothing but that read) whose answer was lost, e.g. to a restart.
	lostRead := readOnly(q.Op) && !errors.Is(err, rpc.ErrNotSent)
	if err != nil && first && errors.Is(err, rpc.ErrClosed) && (errors.Is(err, rpc.ErrNotSent) || lostRead) {
		if rerr := tx.c.reconnect(ctx, nn); rerr == nil {
			nn, gen = tx.c.conn()
			tx.mu.Lock()
			tx.gen = gen
			tx.mu.Unlock()
			r, err = nn.Call(ctx, q)
		}
		if lostRead && err != nil && errors.Is(err, rpc.ErrClosed) && !errors.Is(err, rpc.ErrNotSent) {
			// Nothing happened that matters: a read changes nothing, so
			// the caller may try again as if it had not been sent.
			err = fmt.Errorf("%w: %w", rpc.ErrNotSent, err)
		}
	}
	if err != nil {
		if errors.Is(err, rpc.ErrClosed) {
			// Replace the connection for later transactions; this one is gone.
			tx.c.reconnect(ctx, nn)
		}
		return nil, tx.autoResult(q, err)
	}
	return r, tx.autoResult(q, withReqID(tx.c.noteResponse(r), q.ReqID))
}

// autoFlags marks an Auto transaction's request as compound.
func (tx *Txn) autoFlags(q *wire.Request) {
	if !tx.auto || q.Op == wire.OpCommit || q.Op == wire.OpAbort {
		return
	}
	q.Flags |= wire.FlagCommit
	if tx.async {
		q.Flags |= wire.FlagAsync
	}
}

// autoResult ends an Auto transaction after its request and says honestly
// what happened to a compound request whose answer was lost.
func (tx *Txn) autoResult(q *wire.Request, err error) error {
	if !tx.auto || q.Flags&wire.FlagCommit == 0 {
		return err
	}
	tx.ended = true
	var nerr *Error
	if err == nil || errors.As(err, &nerr) || errors.Is(err, rpc.ErrNotSent) || errors.Is(err, ErrTxn) {
		return err
	}
	return fmt.Errorf("%s in transaction %d: %w: %v", q.Op, tx.id, ErrCommitUnknown, err)
}

// readOnly reports whether op changes nothing on the namenode.
func readOnly(op wire.Op) bool {
	switch op {
	case wire.OpLookup, wire.OpStat, wire.OpReadDir, wire.OpBlocks, wire.OpGlob, wire.OpFsStat,
		wire.OpStats, wire.OpNodes, wire.OpPing, wire.OpPathOf:
		return true
	}
	return false
}

// Unreachable reports whether err says the namenode could not be reached
// and the request was not carried out (it was never sent, or it was a read
// whose answer was lost): trying again later is safe, whatever the request.
func Unreachable(err error) bool { return errors.Is(err, rpc.ErrNotSent) }

// ConnLost reports whether err came from losing the namenode connection (a
// namenode restart, a network failure): the transaction of the request is
// gone, and unless Unreachable(err) holds too, a change the request asked
// for may or may not have been made. A new transaction may try again.
func ConnLost(err error) bool {
	return errors.Is(err, rpc.ErrClosed) || errors.Is(err, rpc.ErrNotSent) ||
		errors.Is(err, ErrConnLost) || errors.Is(err, ErrCommitUnknown)
}

// lost reports whether the transaction was begun on a namenode connection
// that has broken or been replaced since (clientx.Lost).
func (tx *Txn) lost() bool {
	tx.mu.Lock()
	used, gen := tx.used, tx.gen
	tx.mu.Unlock()
	if !used {
		return false
	}
	nn, cur := tx.c.conn()
	return gen != cur || nn.Broken()
}

// Commit writes out buffered file data, makes it durable on every datanode
// written to, and commits. Once Commit returns nil, the changes survive any
// crash. If the connection to the namenode is lost after the commit was
// sent, the outcome is not known and Commit returns an error matching
// ErrCommitUnknown: the transaction may or may not have committed.
func (tx *Txn) Commit(ctx context.Context) error {
	if tx.ended && tx.auto {
		return nil // committed (or failed) with its request
	}
	if tx.ended {
		return fmt.Errorf("%w: transaction %d already ended", ErrTxn, tx.id)
	}
	// The files' last blocks are written now and attached after the
	// datanodes' sync, the last attachment together with the commit: one
	// round trip less for a transaction that wrote.
	var attach []*wire.Request
	for _, f := range tx.openFiles() {
		q, err := f.w.commitData(ctx)
		if err != nil {
			tx.Abort(ctx)
			return err
		}
		if q != nil {
			attach = append(attach, q)
		}
	}
	// Deferred: the namenode has the datanodes sync before the commit
	// becomes durable (internal/namenode/datasync.go).
	tx.mu.Lock()
	singleCopy := tx.singleCopy
	tx.mu.Unlock()
	deferSync := tx.async && !tx.c.cfg.NoDeferDataSync && len(tx.nodes) > 0 && !singleCopy
	// Journaled: the namenode's log makes the data durable (journal.go).
	journaled := tx.journalsData()
	var failed map[string]error
	if !deferSync && !journaled {
		failed = tx.c.data.syncAll(ctx, tx.nodes)
	}
	if len(failed) > 0 && len(attach) > 0 {
		// Replicas are dropped from attached blocks: attach them all first.
		for _, q := range attach {
			if _, err := tx.call(ctx, q); err != nil {
				tx.Abort(ctx)
				return err
			}
		}
		attach = nil
	}
	if len(failed) > 0 {
		// Datanodes that could not make their blocks durable (e.g. died)
		// lose their replicas of this transaction's blocks; the commit goes
		// ahead if every block keeps a durable replica elsewhere.
		var ids []string
		var errs []error
		for addr, err := range failed {
			errs = append(errs, err)
			if id := tx.c.identityAt(addr); id != "" {
				ids = append(ids, id)
			}
		}
		if _, err := tx.call(ctx, &wire.Request{Op: wire.OpDropReplicas, Pref: ids}); err != nil {
			tx.Abort(ctx)
			return fmt.Errorf("commit: written blocks could not be made durable, nothing was committed: %w (%v)", errors.Join(errs...), err)
		}
	}
	var last *wire.Request
	if len(attach) > 0 {
		for _, q := range attach[:len(attach)-1] {
			if _, err := tx.call(ctx, q); err != nil {
				tx.Abort(ctx)
				return err
			}
		}
		last = attach[len(attach)-1]
		last.Flags |= wire.FlagCommit
		if tx.async {
			last.Flags |= wire.FlagAsync
		}
	}
	if deferSync || journaled {
		if last == nil {
			last = &wire.Request{Op: wire.OpCommit}
		}
		last.Flags |= wire.FlagUnsyncedData
	}
	if !tx.used && last == nil {
		tx.ended = true
		return nil
	}
	if last == nil {
		last = &wire.Request{Op: wire.OpCommit}
	}
	_, err := tx.call(ctx, last)
	tx.ended = true
	var nerr *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nerr):
		// The namenode answered: nothing was committed.
		return fmt.Errorf("commit: %w", err)
	case errors.Is(err, rpc.ErrNotSent):
		return fmt.Errorf("commit: %w: the commit never reached the namenode, nothing was committed: %w", ErrTxn, err)
	default:
		return fmt.Errorf("commit of transaction %d: %w: %v", tx.id, ErrCommitUnknown, err)
	}
}

// CommitAsync commits like Commit but is acknowledged once the change is
// applied: visible to every client at once and safe from a namenode
// process crash, durable within the namenode's window (-sync-interval,
// -sync-commits) or at the next durable commit or Client.Sync, whichever
// comes first. After a power cut what survives is a prefix of the commit
// order.
func (tx *Txn) CommitAsync(ctx context.Context) error {
	tx.async = true
	return tx.Commit(ctx)
}

// openFiles returns the files open in tx.
func (tx *Txn) openFiles() []*File {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return slices.Clone(tx.files)
}

// Abort ends the transaction without changing anything. It first waits for
// the files' background writes, so none of them reaches the namenode after
// the abort.
func (tx *Txn) Abort(ctx context.Context) error {
	if tx.ended {
		return nil
	}
	for _, f := range tx.openFiles() {
		f.abandon()
	}
	var err error
	if tx.used {
		_, err = tx.call(ctx, &wire.Request{Op: wire.OpAbort})
	}
	tx.ended = true
	return err
}

func (tx *Txn) attrCall(ctx context.Context, q *wire.Request) (FileInfo, error) {
	r, err := tx.call(ctx, q)
	if err != nil {
		return FileInfo{}, err
	}
	return infoOf(r.Attr), nil
}

// Lookup resolves path (following symbolic links).
func (tx *Txn) Lookup(ctx context.Context, path string) (FileInfo, error) {
	return tx.attrCall(ctx, &wire.Request{Op: wire.OpLookup, Path: path})
}

// Lstat resolves path without following a final symbolic link.
func (tx *Txn) Lstat(ctx context.Context, path string) (FileInfo, error) {
	return tx.attrCall(ctx, &wire.Request{Op: wire.OpLookup, Path: path, Flags: wire.FlagNoFollow})
}

// StatInode returns the attributes of inode ino.
func (tx *Txn) StatInode(ctx context.Context, ino uint64) (FileInfo, error) {
	return tx.attrCall(ctx, &wire.Request{Op: wire.OpStat, Ino: ino})
}

// CreateOptions are the attributes of a new file.
type CreateOptions struct {
	Mode fs.FileMode // default 0644
	Rep  int         // replication; 0 means the cluster default
}

// Create creates a new, empty regular file; it fails with ErrExists if the
// name is taken.
func (tx *Txn) Create(ctx context.Context, path string, opt CreateOptions) (FileInfo, error) {
	if opt.Rep < 0 || opt.Rep > MaxReplication {
		return FileInfo{}, fmt.Errorf("%s: %w: replication %d (1..%d)", path, ErrInvalid, opt.Rep, MaxReplication)
	}
	return tx.attrCall(ctx, &wire.Request{Op: wire.OpCreate, Path: path, Type: wire.TypeFile, Mode: UnixBits(opt.Mode),
		Rep: uint8(opt.Rep), User: tx.c.cfg.User, Group: tx.c.cfg.Group})
}

// Mkdir creates a directory (mode 0 means 0755).
func (tx *Txn) Mkdir(ctx context.Context, path string, mode fs.FileMode) (FileInfo, error) {
	return tx.attrCall(ctx, &wire.Request{Op: wire.OpCreate, Path: path, Type: wire.TypeDir, Mode: UnixBits(mode), User: tx.c.cfg.User, Group: tx.c.cfg.Group})
}

// MkdirAll creates a directory and any missing parents; an existing
// directory is not an error.
func (tx *Txn) MkdirAll(ctx context.Context, path string, mode fs.FileMode) (FileInfo, error) {
	return tx.attrCall(ctx, &wire.Request{Op: wire.OpCreate, Path: path, Type: wire.TypeDir, Flags: wire.FlagParents, Mode: UnixBits(mode), User: tx.c.cfg.User, Group: tx.c.cfg.Group})
}

// Symlink creates a symbolic link at path pointing to target.
func (tx *Txn) Symlink(ctx context.Context, target, path string) (FileInfo, error) {
	return tx.attrCall(ctx, &wire.Request{Op: wire.OpCreate, Path: path, Path2: target, Type: wire.TypeSymlink, User: tx.c.cfg.User, Group: tx.c.cfg.Group})
}

// ReadDir lists a directory, sorted by name. Large directories are
// fetched in pages.
func (tx *Txn) ReadDir(ctx context.Context, path string) ([]DirEntry, error) {
	return tx.readDir(ctx, path, 0)
}

// ReadDirPlus lists a directory like ReadDir with every entry's
// attributes in Info, at one round trip per page.
func (tx *Txn) ReadDirPlus(ctx context.Context, path string) ([]DirEntry, error) {
	return tx.readDir(ctx, path, wire.FlagPlus)
}

func (tx *Txn) readDir(ctx context.Context, path string, flags uint32) ([]DirEntry, error) {
	var out []DirEntry
	after := ""
	for {
		r, err := tx.call(ctx, &wire.Request{Op: wire.OpReadDir, Path: path, Path2: after, Flags: flags})
		if err != nil {
			return nil, err
		}
		for _, e := range r.Entries {
			d := DirEntry{Name: e.Name, Ino: e.Ino, Type: FileType(e.Type)}
			if e.Attr != nil {
				d.Info = infoOf(e.Attr)
			}
			out = append(out, d)
		}
		if len(r.Counters) == 0 || r.Counters[0] == 0 || len(r.Entries) == 0 {
			return out, nil
		}
		after = r.Entries[len(r.Entries)-1].Name
	}
}

// SetAttr lists attribute changes; nil fields are left alone.
type SetAttr struct {
	Mode  *fs.FileMode
	User  *string
	Group *string
	Mtime *time.Time
	Size  *int64
	Rep   *int
}

// SetAttr changes attributes of inode ino.
func (tx *Txn) SetAttr(ctx context.Context, ino uint64, s SetAttr) (FileInfo, error) {
	if s.Size != nil && tx.auto {
		// One request cannot rewrite the partial last block a size change
		// needs (see Truncate): a transaction of its own does it all.
		if tx.ended {
			return FileInfo{}, fmt.Errorf("%w: transaction %d already ended", ErrTxn, tx.id)
		}
		tx.ended = true
		inner := &Txn{c: tx.c, id: tx.c.nextTx.Add(1), async: tx.async}
		fi, err := inner.SetAttr(ctx, ino, s)
		if err != nil {
			inner.Abort(ctx)
			return FileInfo{}, err
		}
		if err := inner.Commit(ctx); err != nil {
			return FileInfo{}, err
		}
		return fi, nil
	}
	if s.Size != nil {
		// A size change goes through the file, which zeroes the rest of a
		// partial last block (see Truncate).
		if err := tx.Truncate(ctx, ino, *s.Size); err != nil {
			return FileInfo{}, err
		}
		s.Size = nil
	}
	q := &wire.Request{Op: wire.OpSetAttr, Ino: ino}
	if s.Mode != nil {
		q.Flags |= wire.FlagMode
		q.Mode = UnixBits(*s.Mode)
	}
	if s.User != nil {
		q.Flags |= wire.FlagOwner
		q.User = *s.User
	}
	if s.Group != nil {
		q.Flags |= wire.FlagGroup
		q.Group = *s.Group
	}
	if s.Mtime != nil {
		q.Flags |= wire.FlagMtime
		q.Mtime = s.Mtime.UnixNano()
	}
	if s.Size != nil {
		q.Flags |= wire.FlagSize
		q.Size = *s.Size
	}
	if s.Rep != nil {
		if *s.Rep < 1 || *s.Rep > MaxReplication {
			return FileInfo{}, fmt.Errorf("%w: replication %d (1..%d)", ErrInvalid, *s.Rep, MaxReplication)
		}
		q.Flags |= wire.FlagRep
		q.Rep = uint8(*s.Rep)
	}
	return tx.attrCall(ctx, q)
}

// Truncate sets the size of file ino; blocks beyond it are freed at
// commit. Bytes past a shorter size read as zeros if the file grows again
// (a partial last block is rewritten, through the file's own writes).
func (tx *Txn) Truncate(ctx context.Context, ino uint64, size int64) error {
	f, err := tx.OpenInode(ctx, ino)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// setSize changes only the size the namenode records (File.Truncate
// handles the partial last block).
func (tx *Txn) setSize(ctx context.Context, ino uint64, size int64) error {
	_, err := tx.attrCall(ctx, &wire.Request{Op: wire.OpSetAttr, Ino: ino, Flags: wire.FlagSize, Size: size})
	return err
}

// Rename moves from to to, replacing a file (or empty directory) at to.
func (tx *Txn) Rename(ctx context.Context, from, to string) error {
	_, err := tx.call(ctx, &wire.Request{Op: wire.OpRename, Path: from, Path2: to})
	return err
}

// Link makes newPath another name of the file at existing.
func (tx *Txn) Link(ctx context.Context, existing, newPath string) error {
	_, err := tx.call(ctx, &wire.Request{Op: wire.OpLink, Path: existing, Path2: newPath})
	return err
}

// Unlink removes a file or symbolic link name. The file's data is deleted
// when its last name is gone and no transaction uses it any more.
func (tx *Txn) Unlink(ctx context.Context, path string) error {
	_, err := tx.call(ctx, &wire.Request{Op: wire.OpUnlink, Path: path})
	return err
}

// Rmdir removes an empty directory.
func (tx *Txn) Rmdir(ctx context.Context, path string) error {
	_, err := tx.call(ctx, &wire.Request{Op: wire.OpUnlink, Path: path, Flags: wire.FlagDir})
	return err
}

// Glob returns the paths matching pattern (path.Match syntax per
// component), expanded by the namenode.
func (tx *Txn) Glob(ctx context.Context, pattern string) ([]string, error) {
	var out []string
	after := ""
	for {
		r, err := tx.call(ctx, &wire.Request{Op: wire.OpGlob, Path: pattern, Path2: after})
		if err != nil {
			return nil, err
		}
		out = append(out, r.Paths...)
		if len(r.Counters) == 0 || r.Counters[0] == 0 || len(r.Paths) == 0 {
			return out, nil
		}
		after = r.Paths[len(r.Paths)-1]
	}
}

// Replica is where one replica of a run of blocks lives.
type Replica struct {
	Datanode string // identity
	Addr     string
	Start    uint64 // first block in the datanode's block store
	Alive    bool
}

// Extent maps file blocks Index..Index+Count-1 to their replicas.
type Extent struct {
	Index    uint64
	Count    int
	Replicas []Replica
}

// Blocks returns the block list of file ino.
func (tx *Txn) Blocks(ctx context.Context, ino uint64) ([]Extent, error) {
	r, err := tx.call(ctx, &wire.Request{Op: wire.OpBlocks, Ino: ino})
	if err != nil {
		return nil, err
	}
	out := make([]Extent, len(r.Extents))
	for i, x := range r.Extents {
		out[i] = Extent{Index: x.Index, Count: int(x.Count)}
		for _, rp := range x.Replicas {
			n, _ := tx.c.node(rp.Node)
			out[i].Replicas = append(out[i].Replicas, Replica{Datanode: n.Identity, Addr: n.Addr, Start: rp.Start, Alive: n.Alive})
		}
	}
	return out, nil
}

var errEnded = errors.New("file closed")
