package clientx

import (
	"context"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/wire"
)

// Operations addressed by directory inode and name, the way FUSE and NFS
// address files. Inode numbers are never reused, so an inode number is a
// stable handle. Each works in any transaction; in one from Auto it also
// commits, in the same round trip.

// Inodes are the inode-addressed operations of one transaction.
type Inodes struct{ tx *client.Txn }

// At returns the inode-addressed operations of tx.
func At(tx *client.Txn) Inodes { return Inodes{tx} }

func (o Inodes) attrCall(ctx context.Context, q *wire.Request) (client.FileInfo, error) {
	r, err := hooks.TxCall(o.tx, ctx, q)
	if err != nil {
		return client.FileInfo{}, err
	}
	return hooks.InfoOf(r.Attr), nil
}

func (o Inodes) create(q *wire.Request) *wire.Request { return hooks.CreateReq(o.tx, q) }

// CreateAs makes the files, directories, links and special files tx
// creates (the *At calls) belong to user and group instead of the
// client's identity, and returns tx. The namenode honours it only for a
// superuser: a gateway such as the FUSE mount, creating for the local user
// whose permissions the kernel has checked. For anyone else the owner
// stays the caller. Empty names keep the default.
func CreateAs(tx *client.Txn, user, group string) *client.Txn {
	hooks.SetOwner(tx, user, group)
	return tx
}

// LookupAt returns the attributes of name in directory dir (a symbolic
// link is returned, not followed).
func (o Inodes) LookupAt(ctx context.Context, dir uint64, name string) (client.FileInfo, error) {
	return o.attrCall(ctx, &wire.Request{Op: wire.OpLookup, Flags: wire.FlagAt, Ino: dir, Path: name})
}

// CreateAt creates the regular file name in directory dir.
func (o Inodes) CreateAt(ctx context.Context, dir uint64, name string, opt client.CreateOptions) (client.FileInfo, error) {
	if opt.Rep < 0 || opt.Rep > client.MaxReplication {
		return client.FileInfo{}, fmt.Errorf("%s: %w: replication %d (1..%d)", name, client.ErrInvalid, opt.Rep, client.MaxReplication)
	}
	return o.attrCall(ctx, o.create(&wire.Request{Op: wire.OpCreate, Flags: wire.FlagAt, Ino: dir, Path: name, Type: wire.TypeFile,
		Mode: client.UnixBits(opt.Mode), Rep: uint8(opt.Rep)}))
}

// MkdirAt creates the directory name in directory dir (mode 0 means 0755).
func (o Inodes) MkdirAt(ctx context.Context, dir uint64, name string, mode fs.FileMode) (client.FileInfo, error) {
	return o.attrCall(ctx, o.create(&wire.Request{Op: wire.OpCreate, Flags: wire.FlagAt, Ino: dir, Path: name, Type: wire.TypeDir,
		Mode: client.UnixBits(mode)}))
}

// SymlinkAt creates the symbolic link name in directory dir, pointing to
// target.
func (o Inodes) SymlinkAt(ctx context.Context, target string, dir uint64, name string) (client.FileInfo, error) {
	return o.attrCall(ctx, o.create(&wire.Request{Op: wire.OpCreate, Flags: wire.FlagAt, Ino: dir, Path: name, Path2: target,
		Type: wire.TypeSymlink}))
}

// MknodAt creates the special file name in directory dir: a FIFO, a
// socket or a device node (rdev is the device's number, Linux dev_t).
// Such files hold no data in PlasmaFS; the kernel of each client gives
// them their meaning.
func (o Inodes) MknodAt(ctx context.Context, dir uint64, name string, typ client.FileType, mode fs.FileMode, rdev uint64) (client.FileInfo, error) {
	q := o.create(&wire.Request{Op: wire.OpCreate, Flags: wire.FlagAt, Ino: dir, Path: name, Type: wire.FileType(typ),
		Mode: client.UnixBits(mode)})
	switch typ {
	case client.TypeFIFO, client.TypeSocket:
	case client.TypeCharDevice, client.TypeBlockDevice:
		q.Path2 = strconv.FormatUint(rdev, 10)
	default:
		return client.FileInfo{}, &client.Error{Code: client.ErrorCode(wire.ErrCodeInvalid), Msg: name + ": mknod of a " + typ.String()}
	}
	return o.attrCall(ctx, q)
}

// LinkAt makes name in directory dir another name of inode ino.
func (o Inodes) LinkAt(ctx context.Context, ino, dir uint64, name string) (client.FileInfo, error) {
	return o.attrCall(ctx, &wire.Request{Op: wire.OpLink, Flags: wire.FlagAt, Ino: ino, Ino2: dir, Path2: name})
}

// UnlinkAt removes the name of a file or symbolic link from directory dir.
func (o Inodes) UnlinkAt(ctx context.Context, dir uint64, name string) error {
	_, err := hooks.TxCall(o.tx, ctx, &wire.Request{Op: wire.OpUnlink, Flags: wire.FlagAt, Ino: dir, Path: name})
	return err
}

// RmdirAt removes the empty directory name from directory dir.
func (o Inodes) RmdirAt(ctx context.Context, dir uint64, name string) error {
	_, err := hooks.TxCall(o.tx, ctx, &wire.Request{Op: wire.OpUnlink, Flags: wire.FlagAt | wire.FlagDir, Ino: dir, Path: name})
	return err
}

// RenameOptions modify RenameAt.
type RenameOptions struct {
	NoReplace bool // fail with ErrExists instead of replacing the target
}

// RenameAt moves name sname of directory sdir to dname in ddir, atomically
// replacing a file or empty directory there unless opt.NoReplace.
func (o Inodes) RenameAt(ctx context.Context, sdir uint64, sname string, ddir uint64, dname string, opt RenameOptions) error {
	q := &wire.Request{Op: wire.OpRename, Flags: wire.FlagAt, Ino: sdir, Path: sname, Ino2: ddir, Path2: dname}
	if opt.NoReplace {
		q.Flags |= wire.FlagExcl
	}
	_, err := hooks.TxCall(o.tx, ctx, q)
	return err
}

// ReadDirPage returns up to max entries (0: the namenode's page size) of
// directory dir that follow the name after in name order, with their
// attributes in Info if plus, and whether more follow. The last name
// returned is the cookie for the next page.
func (o Inodes) ReadDirPage(ctx context.Context, dir uint64, after string, max int, plus bool) ([]client.DirEntry, bool, error) {
	q := &wire.Request{Op: wire.OpReadDir, Ino: dir, Path2: after, Count: uint64(max)}
	if plus {
		q.Flags |= wire.FlagPlus
	}
	r, err := hooks.TxCall(o.tx, ctx, q)
	if err != nil {
		return nil, false, err
	}
	out := make([]client.DirEntry, len(r.Entries))
	for i, e := range r.Entries {
		out[i] = client.DirEntry{Name: e.Name, Ino: e.Ino, Type: client.FileType(e.Type)}
		if e.Attr != nil {
			out[i].Info = hooks.InfoOf(e.Attr)
		}
	}
	return out, len(r.Counters) > 0 && r.Counters[0] != 0, nil
}

// PathOf returns a path of inode ino (one of them, for a file with several
// names), as the transaction sees the namespace.
func (o Inodes) PathOf(ctx context.Context, ino uint64) (string, error) {
	r, err := hooks.TxCall(o.tx, ctx, &wire.Request{Op: wire.OpPathOf, Ino: ino})
	if err != nil {
		return "", err
	}
	if len(r.Paths) != 1 {
		return "", fmt.Errorf("%w: namenode returned %d paths for inode %d", client.ErrInternal, len(r.Paths), ino)
	}
	return r.Paths[0], nil
}
