package datanode

import (
	"fmt"

	"github.com/plasmafs/plasma/internal/wire"
)

// replicate serves DataReplicate: the namenode re-replicates a block by
// having a datanode that holds a good replica send it to a new one. The
// block is read under the read ticket (gen is its generation), checked
// against the committed checksum the namenode sent (a replica damaged on
// disk is never copied), and written to the destination, Chain[0], as a
// write under the destination's own ticket; the destination checks the
// checksum again as it stores the block. buf holds a block.
func (s *Server) replicate(next **hop, q *wire.DataReq, gen uint64, buf []byte) error {
	if len(q.Chain) != 1 {
		return fmt.Errorf("replicate block %d: %d destinations, need 1", q.Block, len(q.Chain))
	}
	crc, n, err := s.store.ReadN(q.Block, buf, gen)
	if err != nil {
		return fmt.Errorf("replicate block %d: %w", q.Block, err)
	}
	if crc != q.CRC {
		return fmt.Errorf("%w: replicate block %d of volume %s: it holds checksum %08x, the committed version has %08x", ErrChecksum, q.Block, s.store.Config.Identity, crc, q.CRC)
	}
	fwd := *q
	fwd.Length = uint32(n)
	return s.forward(next, &fwd, buf[:n])
}
