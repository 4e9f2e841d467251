package fusefs

import "github.com/hanwen/go-fuse/v2/fuse"

// counted is a RawFileSystem that tells onOp of each of the main
// operations (a fixed set of names) before passing it on.
type counted struct {
	fuse.RawFileSystem
	onOp func(op string)
}

func (c counted) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	c.onOp("lookup")
	return c.RawFileSystem.Lookup(cancel, h, name, out)
}

func (c counted) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.onOp("getattr")
	return c.RawFileSystem.GetAttr(cancel, in, out)
}

func (c counted) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.onOp("setattr")
	return c.RawFileSystem.SetAttr(cancel, in, out)
}

func (c counted) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	c.onOp("mkdir")
	return c.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (c counted) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	c.onOp("unlink")
	return c.RawFileSystem.Unlink(cancel, h, name)
}

func (c counted) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	c.onOp("rmdir")
	return c.RawFileSystem.Rmdir(cancel, h, name)
}

func (c counted) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	c.onOp("rename")
	return c.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (c counted) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	c.onOp("create")
	return c.RawFileSystem.Create(cancel, in, name, out)
}

func (c counted) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.onOp("open")
	return c.RawFileSystem.Open(cancel, in, out)
}

func (c counted) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	c.onOp("read")
	return c.RawFileSystem.Read(cancel, in, buf)
}

func (c counted) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	c.onOp("write")
	return c.RawFileSystem.Write(cancel, in, data)
}

func (c counted) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	c.onOp("fsync")
	return c.RawFileSystem.Fsync(cancel, in)
}

func (c counted) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	c.onOp("flush")
	return c.RawFileSystem.Flush(cancel, in)
}

func (c counted) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.onOp("readdirplus")
	return c.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (c counted) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.onOp("readdir")
	return c.RawFileSystem.ReadDir(cancel, in, out)
}
