package datanode

import (
	"context"
	"errors"
	"fmt"

	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// Journaled writes (issue 27 item 1; docs/design.md, "Journaled small
// appends").
//
// A small append committed durably may be made durable by the namenode's
// commit log alone: its bytes were written here (an extension in place,
// Extend) but not synced before the commit. A power cut may then lose
// them, or tear them from their entry. The namenode keeps such writes
// until this datanode has synced after them, and hands those it may have
// lost back in the answer to a registration; they are applied here
// (ApplyJournal), and synced, before the datanode counts as registered
// (before it takes writes or answers a sync).

// ApplyJournal makes block, of generation gen, hold data at off and the
// checksum crc for its first off+len(data) bytes, zero-padded (the
// version a journaled commit made durable), unless it holds that version
// or a later extension of it already. A block holding another
// generation is left alone (its slot was freed and written again: the
// version is nobody's any more). The caller syncs afterwards.
func (s *BlockStore) ApplyJournal(block uint64, off int, data []byte, crc uint32, gen uint64) error {
	bs := int(s.Config.Blocksize)
	end := off + len(data)
	unlock, stored, have, tail, err := s.lockForPatch("journaled write to", block, off, len(data))
	if err != nil {
		return err
	}
	defer unlock()
	if stored != gen {
		return nil
	}
	nOld := bs - int(tail)
	buf := make([]byte, bs)
	if _, err := s.data.ReadAt(buf[:nOld], int64(block)*int64(bs)); err != nil {
		return err
	}
	// Its first end bytes are the version's, and the entry describes
	// them or a later extension whose bytes are all there: nothing lost.
	if Checksum(buf[:end], bs) == crc && nOld >= onDisk(end, bs) && Checksum(buf[:nOld], bs) == have {
		return nil
	}
	// Rebuild the version: the bytes before off are committed and synced
	// (or replayed before this write, in commit order); data, then zeros
	// up to the end of its last page, whatever an extension that was never
	// committed or a torn one left there.
	n := onDisk(end, bs)
	from := min(off, nOld)
	clear(buf[from:n])
	copy(buf[off:end], data)
	if got := Checksum(buf[:end], bs); got != crc {
		return fmt.Errorf("%w: block %d of volume %s: journaled write of %d bytes at %d gives checksum %08x, the commit recorded %08x (its earlier bytes are damaged)", ErrChecksum, block, s.Config.Identity, len(data), off, got, crc)
	}
	if _, err := s.data.WriteAt(buf[from:n], int64(block)*int64(bs)+int64(from)); err != nil {
		return err
	}
	return s.record(block, crc, gen, uint32(bs-n))
}

// applyJournal applies the journaled writes a registration handed over
// and syncs them. A write that cannot be applied (its replica's earlier
// bytes damaged) is logged: that replica fails its checksum for readers
// and the scrubber, and is copied again from another.
func (s *Server) applyJournal(ws []wire.JournalWrite) error {
	if len(ws) == 0 {
		return nil
	}
	failed := 0
	for _, w := range ws {
		// Written under the registration's term, for older read tickets
		// (groupTerm.checkRead): as if by a write ticket of it.
		s.term.wrote(w.Block, s.term.current())
		if err := s.store.ApplyJournal(w.Block, int(w.Offset), w.Data, w.CRC, w.Gen); err != nil {
			failed++
			s.log.Error("journaled write not applied", "block", w.Block, "ino", w.Ino, "index", w.Index, "err", err)
		}
	}
	if err := s.store.Sync(); err != nil {
		return fmt.Errorf("sync %d journaled writes from the namenode: %w", len(ws), err)
	}
	s.log.Info("journaled writes from the namenode applied", "writes", len(ws), "failed", failed)
	return nil
}

// applyJournalPages applies the journaled writes of a registration's
// answer, and of the further pages the namenode has (Counters[2] = 1:
// more follow; registering again on the same connection gets the next),
// and returns the last answer.
func (s *Server) applyJournalPages(ctx context.Context, c *rpc.Conn, resp *wire.Response, addr, socket string) (*wire.Response, error) {
	for {
		if err := s.applyJournal(resp.Journal); err != nil {
			return nil, err
		}
		if len(resp.Counters) < 3 || resp.Counters[2] == 0 {
			return resp, nil
		}
		next, err := c.Call(ctx, &wire.Request{Op: wire.OpRegister, Node: s.nodeInfo(addr, socket)})
		if err == nil && (next.Code != wire.OK || len(next.Nodes) == 0) {
			err = errors.New(next.Msg)
		}
		if err != nil {
			return nil, fmt.Errorf("namenode %s: next page of journaled writes: %w", s.cfg.Namenode, err)
		}
		resp = next
	}
}
