package meta

import (
	"errors"
	"fmt"
	"sort"
)

// The commit log's records: each is one batch of changes, in the store's
// own encoding, with a format version.
//
// Format 1 and later: a zero byte, the format version (uvarint), then the
// batch. Format 0, from before records had versions, is the batch alone:
// it starts with the batch's number of changes, never 0 for a logged
// batch, so the leading zero byte tells the two apart. Format 0 encoded
// inodes and extents as the namenode protocol did then (with a blocksize
// per inode and tickets per extent); its decoding is frozen here.
//
// A batch: the number of changes, then each change's fields in order
// (PutInodes, DelInodes, PutEntries, DelEntries, Blocks, PutNodes,
// InoLimit, Touch), every list as its length and its elements. Integers
// are uvarints, except checksums and datanode ids (u32) and sizes and
// times (i64), which are little-endian.
//
// Format 2 adds, after each change's Touch, its datanode records: Drains
// (by id: id, flag) and RemoveNodes (id, identity). The earlier fields
// are encoded as in format 1.

//
// Format 3 adds, after each change's datanode records, its journaled
// writes (Journal: ino, block index, the block's generation, offset, the
// block's checksum once the data is in place, data). Only a batch holding
// journaled writes is written in format 3; every other batch is still
// written in format 2, so a log written without journaled writes stays
// readable by the programs that read format 2.

// LogFormat is the format version EncodeChanges writes for a batch
// without journaled writes. A change of the encoding gets a new version,
// and DecodeChanges keeps reading the old ones.
const LogFormat = 2

// LogFormatJournal is the format version of a batch holding journaled
// writes (Change.Journal), the newest this program reads.
const LogFormatJournal = 3

// ErrNewerFormat is returned for a record of a format newer than LogFormat.
var ErrNewerFormat = errors.New("record format newer than this program")

// EncodeChanges encodes a batch of changes for the namenode's commit log;
// DecodeChanges reads it back. Replaying a decoded batch through Apply is
// idempotent (every change is an upsert or a delete of whole rows).
func EncodeChanges(changes []*Change) []byte {
	version := uint64(LogFormat)
	for _, c := range changes {
		if len(c.Journal) > 0 {
			version = LogFormatJournal
		}
	}
	e := encoder{}
	e.u8(0)
	e.uv(version)
	e.uv(uint64(len(changes)))
	for _, c := range changes {
		e.uv(uint64(len(c.PutInodes)))
		for i := range c.PutInodes {
			encodeInode(&e, &c.PutInodes[i])
		}
		e.uv(uint64(len(c.DelInodes)))
		for _, ino := range c.DelInodes {
			e.uv(ino)
		}
		e.uv(uint64(len(c.PutEntries)))
		for _, x := range c.PutEntries {
			e.uv(x.Parent)
			e.str(x.Name)
			e.uv(x.Ino)
		}
		e.uv(uint64(len(c.DelEntries)))
		for _, k := range c.DelEntries {
			e.uv(k.Parent)
			e.str(k.Name)
		}
		inos := sortedInos(c.Blocks)
		e.uv(uint64(len(inos)))
		for _, ino := range inos {
			e.uv(ino)
			encodeExtents(&e, c.Blocks[ino])
		}
		e.uv(uint64(len(c.PutNodes)))
		for _, d := range c.PutNodes {
			e.u32(d.ID)
			e.str(d.Identity)
			e.uv(d.Blocks)
			e.bool(d.Enabled)
		}
		e.uv(c.InoLimit)
		inos = sortedInos(c.Touch)
		e.uv(uint64(len(inos)))
		for _, ino := range inos {
			e.uv(ino)
			e.i64(c.Touch[ino])
		}
		ids := sortedIDs(c.Drains)
		e.uv(uint64(len(ids)))
		for _, id := range ids {
			e.u32(id)
			e.bool(c.Drains[id])
		}
		e.uv(uint64(len(c.RemoveNodes)))
		for _, d := range c.RemoveNodes {
			e.u32(d.ID)
			e.str(d.Identity)
		}
		if version >= LogFormatJournal {
			e.uv(uint64(len(c.Journal)))
			for _, j := range c.Journal {
				e.uv(j.Ino)
				e.uv(j.Index)
				e.uv(j.Gen)
				e.uv(uint64(j.Offset))
				e.u32(j.CRC)
				e.str(string(j.Data))
			}
		}
	}
	return e.b
}

func sortedIDs[V any](m map[uint32]V) []uint32 {
	ids := make([]uint32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func sortedInos[V any](m map[uint64]V) []uint64 {
	inos := make([]uint64, 0, len(m))
	for ino := range m {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	return inos
}

func encodeInode(e *encoder, a *Inode) {
	e.uv(a.Ino)
	e.u8(uint8(a.Type))
	e.uv(uint64(a.Mode))
	e.str(a.User)
	e.str(a.Group)
	e.i64(a.Size)
	e.uv(uint64(a.Nlink))
	e.i64(a.Mtime)
	e.i64(a.Ctime)
	e.u8(a.Rep)
	e.uv(a.Seq)
	e.str(a.Target)
}

func encodeExtents(e *encoder, xs []Extent) {
	e.uv(uint64(len(xs)))
	for _, x := range xs {
		e.uv(x.Index)
		e.uv(uint64(x.Count))
		e.uv(uint64(len(x.Replicas)))
		for _, r := range x.Replicas {
			e.uv(uint64(r.Node))
			e.uv(r.Start)
		}
		e.uv(uint64(len(x.CRC)))
		for _, c := range x.CRC {
			e.u32(c)
		}
		e.uv(x.Gen)
	}
}

// DecodeChanges decodes a batch written by EncodeChanges, of this format
// version or an earlier one. A batch of a later version is refused
// (ErrNewerFormat): it may hold what this program would misread.
func DecodeChanges(b []byte) ([]*Change, error) {
	version := uint64(0)
	d := decoder{b: b}
	if len(b) > 1 && b[0] == 0 {
		d.u8()
		version = d.uv()
		switch {
		case d.err != nil:
			return nil, fmt.Errorf("decode changes: %w", d.err)
		case version == 0:
			return nil, errors.New("decode changes: format version 0 after the version marker")
		case version > LogFormatJournal:
			return nil, fmt.Errorf("%w: format %d, this program reads formats up to %d (a newer plasma wrote it: run that version or a later one)",
				ErrNewerFormat, version, LogFormatJournal)
		}
	}
	out := decodeBatch(&d, version)
	if d.err == nil && len(d.b) != 0 {
		return nil, fmt.Errorf("decode changes (format %d): %d trailing bytes", version, len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode changes (format %d): %w", version, d.err)
	}
	return out, nil
}

// decodeBatch decodes a batch of the given format version.
func decodeBatch(d *decoder, version uint64) []*Change {
	n := d.count(1)
	out := make([]*Change, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		c := &Change{}
		for k := d.count(1); k > 0 && d.err == nil; k-- {
			c.PutInodes = append(c.PutInodes, decodeInode(d, version))
		}
		for k := d.count(1); k > 0 && d.err == nil; k-- {
			c.DelInodes = append(c.DelInodes, d.uv())
		}
		for k := d.count(3); k > 0 && d.err == nil; k-- {
			var x Entry
			x.Parent = d.uv()
			x.Name = d.str()
			x.Ino = d.uv()
			c.PutEntries = append(c.PutEntries, x)
		}
		for k := d.count(2); k > 0 && d.err == nil; k-- {
			var x EntryKey
			x.Parent = d.uv()
			x.Name = d.str()
			c.DelEntries = append(c.DelEntries, x)
		}
		if k := d.count(2); k > 0 {
			c.Blocks = make(map[uint64][]Extent, k)
			for ; k > 0 && d.err == nil; k-- {
				ino := d.uv()
				c.Blocks[ino] = decodeExtents(d, version)
			}
		}
		for k := d.count(7); k > 0 && d.err == nil; k-- {
			var x Datanode
			x.ID = d.u32()
			x.Identity = d.str()
			x.Blocks = d.uv()
			x.Enabled = d.bool()
			c.PutNodes = append(c.PutNodes, x)
		}
		c.InoLimit = d.uv()
		if k := d.count(9); k > 0 {
			c.Touch = make(map[uint64]int64, k)
			for ; k > 0 && d.err == nil; k-- {
				ino := d.uv()
				c.Touch[ino] = d.i64()
			}
		}
		if version >= 2 {
			decodeNodeRecords(d, c)
		}
		if version >= LogFormatJournal {
			for k := d.count(4); k > 0 && d.err == nil; k-- {
				var j JournalWrite
				j.Ino = d.uv()
				j.Index = d.uv()
				j.Gen = d.uv()
				off := d.uv()
				if off > 1<<31 {
					d.fail("journaled write at offset %d", off)
				}
				j.Offset = uint32(off)
				j.CRC = d.u32()
				j.Data = append([]byte(nil), d.bytes()...)
				c.Journal = append(c.Journal, j)
			}
		}
		out = append(out, c)
	}
	return out
}

// decodeNodeRecords decodes a change's datanode records (format 2).
func decodeNodeRecords(d *decoder, c *Change) {
	if k := d.count(5); k > 0 {
		c.Drains = make(map[uint32]bool, k)
		for ; k > 0 && d.err == nil; k-- {
			id := d.u32()
			c.Drains[id] = d.bool()
		}
	}
	for k := d.count(5); k > 0 && d.err == nil; k-- {
		var x RemovedDatanode
		x.ID = d.u32()
		x.Identity = d.str()
		c.RemoveNodes = append(c.RemoveNodes, x)
	}
}

func decodeInode(d *decoder, version uint64) Inode {
	var a Inode
	a.Ino = d.uv()
	a.Type = InodeType(d.u8())
	a.Mode = uint32(d.uv())
	a.User = d.str()
	a.Group = d.str()
	a.Size = d.i64()
	a.Nlink = uint32(d.uv())
	a.Mtime = d.i64()
	a.Ctime = d.i64()
	a.Rep = d.u8()
	if version == 0 {
		d.uv() // the protocol's blocksize: the namenode's, not the inode's
	}
	a.Seq = d.uv()
	a.Target = d.str()
	return a
}

func decodeExtents(d *decoder, version uint64) []Extent {
	n := d.count(4)
	xs := make([]Extent, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		var x Extent
		x.Index = d.uv()
		c := d.uv()
		if c > 1<<32-1 {
			d.fail("extent of %d blocks", c)
		}
		x.Count = uint32(c)
		x.Replicas = make([]Run, d.count(2))
		for j := range x.Replicas {
			x.Replicas[j].Node = uint32(d.uv())
			x.Replicas[j].Start = d.uv()
		}
		nc := d.count(4)
		if nc != 0 && nc != int(x.Count) {
			d.fail("extent of %d blocks with %d checksums", x.Count, nc)
		}
		if nc > 0 {
			x.CRC = make([]uint32, nc)
			for j := range x.CRC {
				x.CRC[j] = d.u32()
			}
		}
		if version == 0 {
			for k := d.count(1); k > 0 && d.err == nil; k-- {
				d.bytes() // the protocol's tickets: never logged, always empty
			}
		}
		x.Gen = d.uv()
		xs = append(xs, x)
	}
	return xs
}

// HoldsJournal reports whether a log record is of the format that holds
// journaled writes (without decoding it).
func HoldsJournal(record []byte) bool {
	return len(record) > 1 && record[0] == 0 && record[1] == LogFormatJournal
}
