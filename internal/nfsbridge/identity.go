package nfsbridge

import (
	"context"
	"syscall"

	"github.com/plasmafs/plasma/internal/vfs"
)

// Options are the bridge's export options about who its callers are.
// AUTH_UNIX authenticates nobody: a client names any uid and gid it likes.
// Squashing limits what the claim of being root (or, with AllSquash, of
// being anyone) is worth; which machines may claim anything at all is
// ClientList's business.
type Options struct {
	// NoRootSquash serves AUTH_UNIX uid 0 as root (knfsd's
	// no_root_squash). Otherwise uid 0 is served as the anonymous
	// identity, and gid 0 as the anonymous group.
	NoRootSquash bool
	// AllSquash serves every caller as the anonymous identity (all_squash).
	AllSquash bool
	// AnonUID and AnonGID are the anonymous identity's ids; 0 stands for
	// vfs.Nobody (the anonymous identity is never root).
	AnonUID, AnonGID uint32
	// OnCall, if set, is told of every RPC call by its procedure's name
	// (metrics.go), for metrics.
	OnCall func(proc string)
}

// caller is who the bridge serves a call for: the AUTH_UNIX ids, or the
// anonymous identity.
type caller struct {
	uid, gid uint32
	// anon: the anonymous identity. It owns what belongs to the anonymous
	// user by name and is in the anonymous group by name, nothing else:
	// an owner name without a local id also maps to vfs.Nobody, and the
	// anonymous identity must not own every such file.
	anon bool
	// anonGroup: gid is the anonymous group (squashed, or claimed as
	// vfs.Nobody), which is in the group of a file by name only, for the
	// same reason.
	anonGroup bool
}

// root reports whether c has root's rights.
func (c caller) root() bool { return !c.anon && c.uid == 0 }

// identity is the bridge's squashing policy and the PlasmaFS names of its
// anonymous identity.
type identity struct {
	opt                 Options
	anonUser, anonGroup string
}

func newIdentity(v *vfs.VFS, o Options) identity {
	if o.AnonUID == 0 {
		o.AnonUID = vfs.Nobody
	}
	if o.AnonGID == 0 {
		o.AnonGID = vfs.Nobody
	}
	// The names are what the VFS creates for these ids (vfs.Caller), so
	// that the anonymous identity owns what it creates.
	return identity{opt: o, anonUser: v.UserName(o.AnonUID), anonGroup: v.GroupName(o.AnonGID)}
}

func (id identity) anonymous() caller {
	return caller{uid: id.opt.AnonUID, gid: id.opt.AnonGID, anon: true}
}

// callerOf maps a call's credential to the caller it is served as: no
// AUTH_UNIX credential (AUTH_NULL or a flavor the bridge cannot read) is
// anonymous, as with knfsd; so is every caller with AllSquash, and uid 0
// unless NoRootSquash (gid 0 alone becomes the anonymous group). A claim
// of uid or gid vfs.Nobody is anonymous too: that is the id of every
// owner and group without a local id, whose files it would otherwise own.
func (id identity) callerOf(u *authUnix) caller {
	switch {
	case u == nil, id.opt.AllSquash, u.uid == vfs.Nobody:
		return id.anonymous()
	case u.uid == 0 && !id.opt.NoRootSquash:
		return id.anonymous()
	}
	c := caller{uid: u.uid, gid: u.gid}
	if c.gid == 0 && !id.opt.NoRootSquash || c.gid == vfs.Nobody {
		c.gid, c.anonGroup = id.opt.AnonGID, true
	}
	return c
}

type callerKey struct{}

// callerCtx carries the call's caller, so that what it creates is theirs
// (as through the FUSE mount, the namenode honours this only when the
// bridge's credential is a superuser's) and its access is checked for
// them (access).
func (b *Bridge) callerCtx(h rpcCallHeader) context.Context {
	c := b.id.callerOf(h.unix)
	ctx := vfs.WithCaller(context.Background(), vfs.Caller{UID: c.uid, GID: c.gid})
	return context.WithValue(ctx, callerKey{}, c)
}

// callerIn returns the caller ctx carries; a context without one is
// served as the anonymous identity.
func (b *Bridge) callerIn(ctx context.Context) caller {
	if c, ok := ctx.Value(callerKey{}).(caller); ok {
		return c
	}
	return b.id.anonymous()
}

// owns reports whether c owns what has attributes a.
func (b *Bridge) owns(c caller, a vfs.Attr) bool {
	if c.anon {
		return a.User == b.id.anonUser
	}
	return b.v.UID(a.User) == c.uid
}

// access checks that the caller may use inode ino as mask asks (no
// kernel checks for NFS callers, as one does for the FUSE mount).
func (b *Bridge) access(ctx context.Context, ino uint64, mask uint32) error {
	c := b.callerIn(ctx)
	a, err := b.v.GetAttr(ctx, ino)
	if err != nil {
		return err
	}
	if !c.anon {
		var gids []uint32
		if !c.anonGroup || a.Group == b.id.anonGroup {
			gids = []uint32{c.gid}
		}
		return b.v.Access(ctx, ino, mask, c.uid, gids)
	}
	if mask&mayWrite != 0 && b.v.ReadOnly() {
		return vfs.ErrReadOnly
	}
	// The anonymous identity's bits: other's, unless the file is its
	// own by name (see caller.anon); never root's.
	perm := uint32(a.Mode.Perm())
	switch {
	case a.User == b.id.anonUser:
		perm >>= 6
	case a.Group == b.id.anonGroup:
		perm >>= 3
	}
	if mask&7&^perm != 0 {
		return syscall.EACCES
	}
	return nil
}
