package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/plasmafs/plasma/internal/blockcrc"
	"github.com/plasmafs/plasma/internal/wire"
)

// Small appends extend the file's last block in place.
//
// Blocks are copy-on-write: a flush writes every dirty block to newly
// allocated blocks. For a small append to a file whose committed last block
// is partly filled that means rewriting the whole block on every replica,
// megabytes for a few bytes. Instead, when the only change to that block
// lies past its committed bytes, the flush asks the namenode for append
// tickets (OpExtend) and sends the datanodes just the new bytes, which they
// write into the block in place (datanode.BlockStore.Extend): the tickets
// allow writing only past the committed length, so a reader of any
// committed version, a prefix of the block, keeps reading it (it checks
// only its prefix, see dataPool.readBlock). When the namenode or a datanode
// refuses, the block is written copy-on-write as before.
//
// Bytes an extension wrote that were never committed stay in the block past
// its committed length. The next append finds the block holding another
// version than the committed one and copies it; growing the file past the
// block by other means (a write further on, a truncate upwards) would
// expose them as file content, so the file then extends or rewrites the
// block first (growing).

// extendBlock writes dirty block idx (buffer b, whose first kept bytes are
// the committed version's) by extending the committed block in place, and
// returns the extent to attach; ok is false when the block must be written
// copy-on-write instead. A conflict (another transaction holds the file)
// is returned: the transaction is retried, rather than copying a block
// that may be extensible once the other one has ended.
func (f *File) extendBlock(ctx context.Context, idx uint64, b []byte, kept int, size int64) (x wire.Extent, ok bool, err error) {
	valid := int(min(size-int64(idx)*int64(f.bs), int64(f.bs)))
	if valid <= kept {
		return x, false, nil
	}
	r, err := f.tx.call(ctx, &wire.Request{Op: wire.OpExtend, Ino: f.ino, Index: idx})
	if errors.Is(err, ErrConflict) {
		return x, false, fmt.Errorf("%s: %w", f.path, err)
	}
	if err != nil || len(r.Extents) != 1 || len(r.Counters) != 1 {
		return x, false, nil // refused (not the committed partial last block, …)
	}
	x = r.Extents[0]
	from := int(r.Counters[0])
	if x.Index != idx || x.Count != 1 || len(x.CRC) != 1 || len(x.Replicas) == 0 || from <= 0 || from > kept || from >= valid {
		return x, false, nil
	}
	// The committed bytes after from are zeros: the new block is the old
	// one with data placed at from (blockcrc.Placed), so its checksum costs
	// what the append writes. A datanode whose block is not that version
	// refuses. Trailing zeros need not travel: past the data the block reads as
	// zeros (its tail), and a later extension past them writes them out
	// (datanode.BlockStore.Extend). A file grown by a truncate upwards
	// sends nothing.
	data := b[from:valid]
	for len(data) > 0 && data[len(data)-1] == 0 {
		data = data[:len(data)-1]
	}
	crc := x.CRC[0] ^ blockcrc.Placed(from, data, f.bs) ^ blockcrc.ZeroExtend(0, uint64(f.bs))
	addrs, starts := f.tx.c.replicaAddrs(x)
	if err := f.tx.c.data.extend(ctx, f.tx.reqID(), addrs, starts, x.Tickets, from, data, x.CRC[0], crc); err != nil {
		return x, false, nil
	}
	f.tx.wroteTo(addrs)
	x.CRC = []uint32{crc}
	x.Tickets = nil
	return x, true, nil
}

// growing prepares the file to grow to size: a partly filled last block
// is made dirty as it is (its bytes past the end of the file zeroed, its
// committed bytes left unread where possible: prefix.go), so the flush
// rewrites or extends it and whatever an extension left past its end,
// never committed, does not become file content. Called with f.mu held.
func (f *File) growing(size int64) error {
	if size <= f.size || f.size%int64(f.bs) == 0 {
		return nil
	}
	last := uint64((f.size - 1) / int64(f.bs))
	if _, ok := f.dirty[last]; ok {
		return nil
	}
	if _, ok := f.inflight[last]; ok {
		return nil // being written: that rewrites it
	}
	valid := int(f.size - int64(last)*int64(f.bs))
	b := getBlockBuf(f.bs, true)
	if !f.deferPrefix(last, int64(valid)) {
		if err := f.loadBlocks(); err != nil {
			putBlockBuf(b)
			return err
		}
		if _, _, ok := f.locate(last); !ok {
			putBlockBuf(b)
			return nil // a hole
		}
		if err := f.readBlock(last, b, false); err != nil {
			putBlockBuf(b)
			return err
		}
		clear(b[valid:])
	}
	f.dirty[last] = b
	f.kept[last] = valid
	return nil
}
