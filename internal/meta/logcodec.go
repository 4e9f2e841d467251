package meta

import (
	"fmt"
	"sort"

	"github.com/plasmafs/plasma/internal/wire"
)

// EncodeChanges encodes a batch of changes for the namenode's commit log;
// DecodeChanges reads it back. Replaying a decoded batch through Apply is
// idempotent (every change is an upsert or a delete of whole rows).
func EncodeChanges(changes []*Change) []byte {
	e := wire.Enc{}
	e.Uv(uint64(len(changes)))
	for _, c := range changes {
		e.Uv(uint64(len(c.PutInodes)))
		for i := range c.PutInodes {
			wire.EncodeAttr(&e, &c.PutInodes[i])
		}
		e.Uv(uint64(len(c.DelInodes)))
		for _, ino := range c.DelInodes {
			e.Uv(ino)
		}
		e.Uv(uint64(len(c.PutEntries)))
		for _, x := range c.PutEntries {
			e.Uv(x.Parent)
			e.Str(x.Name)
			e.Uv(x.Ino)
		}
		e.Uv(uint64(len(c.DelEntries)))
		for _, k := range c.DelEntries {
			e.Uv(k.Parent)
			e.Str(k.Name)
		}
		inos := make([]uint64, 0, len(c.Blocks))
		for ino := range c.Blocks {
			inos = append(inos, ino)
		}
		sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
		e.Uv(uint64(len(inos)))
		for _, ino := range inos {
			e.Uv(ino)
			wire.EncodeExtents(&e, c.Blocks[ino])
		}
		e.Uv(uint64(len(c.PutNodes)))
		for _, d := range c.PutNodes {
			e.U32(d.ID)
			e.Str(d.Identity)
			e.Uv(d.Blocks)
			e.Bool(d.Enabled)
		}
		e.Uv(c.InoLimit)
		e.Uv(uint64(len(c.Touch)))
		for ino, mt := range c.Touch {
			e.Uv(ino)
			e.I64(mt)
		}
	}
	return e.B
}

// DecodeChanges decodes a batch written by EncodeChanges.
func DecodeChanges(b []byte) ([]*Change, error) {
	d := wire.Dec{B: b}
	n := d.Len(wire.MaxList, 1)
	out := make([]*Change, 0, n)
	for i := 0; i < n && d.Err == nil; i++ {
		c := &Change{}
		for k := d.Len(wire.MaxList, 1); k > 0 && d.Err == nil; k-- {
			c.PutInodes = append(c.PutInodes, *wire.DecodeAttr(&d))
		}
		for k := d.Len(wire.MaxList, 1); k > 0 && d.Err == nil; k-- {
			c.DelInodes = append(c.DelInodes, d.Uv())
		}
		for k := d.Len(wire.MaxList, 3); k > 0 && d.Err == nil; k-- {
			var x Entry
			x.Parent = d.Uv()
			x.Name = d.Str(wire.MaxName)
			x.Ino = d.Uv()
			c.PutEntries = append(c.PutEntries, x)
		}
		for k := d.Len(wire.MaxList, 2); k > 0 && d.Err == nil; k-- {
			var x EntryKey
			x.Parent = d.Uv()
			x.Name = d.Str(wire.MaxName)
			c.DelEntries = append(c.DelEntries, x)
		}
		if k := d.Len(wire.MaxList, 2); k > 0 {
			c.Blocks = make(map[uint64][]wire.Extent, k)
			for ; k > 0 && d.Err == nil; k-- {
				ino := d.Uv()
				c.Blocks[ino] = wire.DecodeExtents(&d)
			}
		}
		for k := d.Len(wire.MaxList, 7); k > 0 && d.Err == nil; k-- {
			var x Datanode
			x.ID = d.U32()
			x.Identity = d.Str(wire.MaxName)
			x.Blocks = d.Uv()
			x.Enabled = d.Bool()
			c.PutNodes = append(c.PutNodes, x)
		}
		c.InoLimit = d.Uv()
		if k := d.Len(wire.MaxList, 9); k > 0 {
			c.Touch = make(map[uint64]int64, k)
			for ; k > 0 && d.Err == nil; k-- {
				ino := d.Uv()
				c.Touch[ino] = d.I64()
			}
		}
		out = append(out, c)
	}
	if d.Err == nil && len(d.B) != 0 {
		return nil, fmt.Errorf("decode changes: %d trailing bytes", len(d.B))
	}
	if d.Err != nil {
		return nil, fmt.Errorf("decode changes: %w", d.Err)
	}
	return out, nil
}
