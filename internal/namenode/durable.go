package namenode

import (
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// The store keeps types of its own (meta.Inode, meta.Extent): what it
// holds is durable, the protocol's types (wire) are not. The namenode
// converts here only: from the protocol's when a commit is prepared
// (prepareCommit), to them when the metadata is loaded (New).

// inodeTypes pairs each protocol file type with its durable value.
var inodeTypes = [...]struct {
	wire  wire.FileType
	store meta.InodeType
}{
	{wire.TypeFile, meta.TypeFile},
	{wire.TypeDir, meta.TypeDir},
	{wire.TypeSymlink, meta.TypeSymlink},
	{wire.TypeFIFO, meta.TypeFIFO},
	{wire.TypeSocket, meta.TypeSocket},
	{wire.TypeCharDevice, meta.TypeCharDevice},
	{wire.TypeBlockDevice, meta.TypeBlockDevice},
}

// storeType is t's durable value (0 for a type the namenode never
// creates).
func storeType(t wire.FileType) meta.InodeType {
	for _, p := range inodeTypes {
		if p.wire == t {
			return p.store
		}
	}
	return 0
}

// wireType is the protocol's file type of a stored inode type.
func wireType(t meta.InodeType) wire.FileType {
	for _, p := range inodeTypes {
		if p.store == t {
			return p.wire
		}
	}
	return 0
}

func storeInode(a *wire.Attr) meta.Inode {
	return meta.Inode{Ino: a.Ino, Type: storeType(a.Type), Mode: a.Mode, User: a.User, Group: a.Group, Size: a.Size,
		Nlink: a.Nlink, Mtime: a.Mtime, Ctime: a.Ctime, Rep: a.Rep, Seq: a.Seq, Target: a.Target}
}

func wireAttr(a *meta.Inode) wire.Attr {
	return wire.Attr{Ino: a.Ino, Type: wireType(a.Type), Mode: a.Mode, User: a.User, Group: a.Group, Size: a.Size,
		Nlink: a.Nlink, Mtime: a.Mtime, Ctime: a.Ctime, Rep: a.Rep, Seq: a.Seq, Target: a.Target}
}

// storeExtents converts a block list (tickets, which are never stored,
// left out); the checksum lists are shared, as neither side changes them.
// It runs under the namenode lock for every written file of a commit, so
// it allocates twice per list, not once per extent.
func storeExtents(xs []wire.Extent) []meta.Extent {
	out := make([]meta.Extent, len(xs))
	nreps := 0
	for _, x := range xs {
		nreps += len(x.Replicas)
	}
	runs := make([]meta.Run, 0, nreps)
	for i, x := range xs {
		first := len(runs)
		for _, r := range x.Replicas {
			runs = append(runs, meta.Run{Node: r.Node, Start: r.Start})
		}
		out[i] = meta.Extent{Index: x.Index, Count: x.Count, Replicas: runs[first:len(runs):len(runs)], CRC: x.CRC, Gen: x.Gen}
	}
	return out
}

func wireExtents(xs []meta.Extent) []wire.Extent {
	if xs == nil {
		return nil
	}
	out := make([]wire.Extent, len(xs))
	for i, x := range xs {
		reps := make([]wire.Run, len(x.Replicas))
		for j, r := range x.Replicas {
			reps[j] = wire.Run{Node: r.Node, Start: r.Start}
		}
		out[i] = wire.Extent{Index: x.Index, Count: x.Count, Replicas: reps, CRC: x.CRC, Gen: x.Gen}
	}
	return out
}
