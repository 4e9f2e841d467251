package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// Operations addressed by directory inode and name, the way FUSE and NFS
// address files. Inode numbers are never reused, so an inode number is a
// stable handle. Each works in any transaction; in one from Client.Auto it
// also commits, in the same round trip.

// Durability says when a commit is acknowledged.
type Durability int

const (
	// Durable commits are acknowledged once they survive a power cut.
	Durable Durability = iota
	// Async commits are acknowledged once applied: visible to every
	// client at once and safe from a namenode process crash, durable
	// within the namenode's window (-sync-interval, -sync-commits) or at
	// the next durable commit or Sync, whichever comes first. After a
	// power cut what survives is a prefix of the commit order.
	Async
)

// Auto returns a transaction whose first request also commits it, in the
// same round trip, with durability d. On failure nothing of it remains;
// if the connection is lost after the request was sent, the error
// matches ErrCommitUnknown. Meant for one namespace operation (LookupAt,
// CreateAt, RenameAt, SetAttr, …), not for file data.
func (c *Client) Auto(d Durability) *Txn {
	return &Txn{c: c, id: c.nextTx.Add(1), auto: true, async: d == Async}
}

// CommitAsync commits like Commit but is acknowledged once the change is
// applied (see Async); Client.Sync waits until it is durable.
func (tx *Txn) CommitAsync(ctx context.Context) error {
	tx.async = true
	return tx.Commit(ctx)
}

// Sync returns once every commit acknowledged before it (by any client)
// is durable.
func (c *Client) Sync(ctx context.Context) error {
	_, err := c.call(ctx, &wire.Request{Op: wire.OpSync})
	return err
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

// LookupAt returns the attributes of name in directory dir (a symbolic
// link is returned, not followed).
func (tx *Txn) LookupAt(ctx context.Context, dir uint64, name string) (FileInfo, error) {
	return tx.attrCall(ctx, &wire.Request{Op: wire.OpLookup, Flags: wire.FlagAt, Ino: dir, Path: name})
}

// CreateAt creates the regular file name in directory dir.
func (tx *Txn) CreateAt(ctx context.Context, dir uint64, name string, opt CreateOptions) (FileInfo, error) {
	if opt.Rep < 0 || opt.Rep > wire.MaxReplica {
		return FileInfo{}, fmt.Errorf("%s: %w: replication %d (1..%d)", name, ErrInvalid, opt.Rep, wire.MaxReplica)
	}
	return tx.attrCall(ctx, tx.createReq(&wire.Request{Op: wire.OpCreate, Flags: wire.FlagAt, Ino: dir, Path: name, Type: wire.TypeFile,
		Mode: UnixBits(opt.Mode), Rep: uint8(opt.Rep)}))
}

// MkdirAt creates the directory name in directory dir (mode 0 means 0755).
func (tx *Txn) MkdirAt(ctx context.Context, dir uint64, name string, mode fs.FileMode) (FileInfo, error) {
	return tx.attrCall(ctx, tx.createReq(&wire.Request{Op: wire.OpCreate, Flags: wire.FlagAt, Ino: dir, Path: name, Type: wire.TypeDir,
		Mode: UnixBits(mode)}))
}

// SymlinkAt creates the symbolic link name in directory dir, pointing to
// target.
func (tx *Txn) SymlinkAt(ctx context.Context, target string, dir uint64, name string) (FileInfo, error) {
	return tx.attrCall(ctx, tx.createReq(&wire.Request{Op: wire.OpCreate, Flags: wire.FlagAt, Ino: dir, Path: name, Path2: target,
		Type: wire.TypeSymlink}))
}

// MknodAt creates the special file name in directory dir: a FIFO, a
// socket or a device node (rdev is the device's number, Linux dev_t).
// Such files hold no data in PlasmaFS; the kernel of each client gives
// them their meaning.
func (tx *Txn) MknodAt(ctx context.Context, dir uint64, name string, typ FileType, mode fs.FileMode, rdev uint64) (FileInfo, error) {
	q := tx.createReq(&wire.Request{Op: wire.OpCreate, Flags: wire.FlagAt, Ino: dir, Path: name, Type: wire.FileType(typ),
		Mode: UnixBits(mode)})
	switch typ {
	case TypeFIFO, TypeSocket:
	case TypeCharDevice, TypeBlockDevice:
		q.Path2 = strconv.FormatUint(rdev, 10)
	default:
		return FileInfo{}, &Error{Code: ErrorCode(wire.ErrCodeInvalid), Msg: name + ": mknod of a " + typ.String()}
	}
	return tx.attrCall(ctx, q)
}

// LinkAt makes name in directory dir another name of inode ino.
func (tx *Txn) LinkAt(ctx context.Context, ino, dir uint64, name string) (FileInfo, error) {
	return tx.attrCall(ctx, &wire.Request{Op: wire.OpLink, Flags: wire.FlagAt, Ino: ino, Ino2: dir, Path2: name})
}

// UnlinkAt removes the name of a file or symbolic link from directory dir.
func (tx *Txn) UnlinkAt(ctx context.Context, dir uint64, name string) error {
	_, err := tx.call(ctx, &wire.Request{Op: wire.OpUnlink, Flags: wire.FlagAt, Ino: dir, Path: name})
	return err
}

// RmdirAt removes the empty directory name from directory dir.
func (tx *Txn) RmdirAt(ctx context.Context, dir uint64, name string) error {
	_, err := tx.call(ctx, &wire.Request{Op: wire.OpUnlink, Flags: wire.FlagAt | wire.FlagDir, Ino: dir, Path: name})
	return err
}

// RenameOptions modify RenameAt.
type RenameOptions struct {
	NoReplace bool // fail with ErrExists instead of replacing the target
}

// RenameAt moves name sname of directory sdir to dname in ddir, atomically
// replacing a file or empty directory there unless opt.NoReplace.
func (tx *Txn) RenameAt(ctx context.Context, sdir uint64, sname string, ddir uint64, dname string, opt RenameOptions) error {
	q := &wire.Request{Op: wire.OpRename, Flags: wire.FlagAt, Ino: sdir, Path: sname, Ino2: ddir, Path2: dname}
	if opt.NoReplace {
		q.Flags |= wire.FlagExcl
	}
	_, err := tx.call(ctx, q)
	return err
}

// ReadDirPage returns up to max entries (0: the namenode's page size) of
// directory dir that follow the name after in name order, with their
// attributes in Info if plus, and whether more follow. The last name
// returned is the cookie for the next page.
func (tx *Txn) ReadDirPage(ctx context.Context, dir uint64, after string, max int, plus bool) ([]DirEntry, bool, error) {
	q := &wire.Request{Op: wire.OpReadDir, Ino: dir, Path2: after, Count: uint64(max)}
	if plus {
		q.Flags |= wire.FlagPlus
	}
	r, err := tx.call(ctx, q)
	if err != nil {
		return nil, false, err
	}
	out := make([]DirEntry, len(r.Entries))
	for i, e := range r.Entries {
		out[i] = DirEntry{Name: e.Name, Ino: e.Ino, Type: FileType(e.Type)}
		if e.Attr != nil {
			out[i].Info = infoOf(e.Attr)
		}
	}
	return out, len(r.Counters) > 0 && r.Counters[0] != 0, nil
}

// PathOf returns a path of inode ino (one of them, for a file with several
// names), as the transaction sees the namespace.
func (tx *Txn) PathOf(ctx context.Context, ino uint64) (string, error) {
	r, err := tx.call(ctx, &wire.Request{Op: wire.OpPathOf, Ino: ino})
	if err != nil {
		return "", err
	}
	if len(r.Paths) != 1 {
		return "", fmt.Errorf("%w: namenode returned %d paths for inode %d", ErrInternal, len(r.Paths), ino)
	}
	return r.Paths[0], nil
}
