package datanode

import (
	"errors"
	"fmt"

	"github.com/plasmafs/plasma/internal/wire"
)

// maxCopiesInFlight bounds the re-replicated blocks a connection has sent
// to their destination without having read its answer: the next block is
// read and sent while the destination still stores the previous ones, so
// the source's reads, the transfer and the destination's writes overlap
// instead of taking turns.
const maxCopiesInFlight = 8

// sendReplica serves DataReplicate up to sending the block: the namenode
// re-replicates a block by having a datanode that holds a good replica
// send it to a new one. The block is read under the read ticket (gen is
// its generation), checked against the committed checksum the namenode
// sent (a replica damaged on disk is never copied), and sent to the
// destination, Chain[0], as a write under the destination's own ticket;
// the destination checks the checksum again as it stores the block. Its
// answer is read later, by copyPipe.drain (several blocks may be in
// flight on the connection). buf holds a block; it may be reused as soon
// as sendReplica returns. A failure to read or check the block leaves
// nothing sent; a failure to send leaves *next closed (nil).
func (s *Server) sendReplica(next **hop, q *wire.DataReq, gen uint64, buf []byte) error {
	if len(q.Chain) != 1 {
		return fmt.Errorf("replicate block %d: %d destinations, need 1", q.Block, len(q.Chain))
	}
	if !s.copies.wait(int(s.store.Config.Blocksize), s.stop) {
		return fmt.Errorf("replicate block %d: datanode %s is shutting down", q.Block, s.store.Config.Identity)
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
	return s.sendHop(next, &fwd, buf[:n])
}

// sentCopy is a re-replicated block sent to its destination whose answer
// is not read yet.
type sentCopy struct {
	q    *wire.DataReq // the request as received
	addr string        // the destination
}

// copyPipe holds one connection's re-replicated blocks in flight, in the
// order they were asked for (and their answers are due).
type copyPipe struct {
	sent []sentCopy
}

// accepts reports whether a DataReplicate request q may join the blocks
// in flight: it goes to the same destination, over the same connection,
// and there is room.
func (p *copyPipe) accepts(q *wire.DataReq) bool {
	if len(p.sent) == 0 {
		return true
	}
	return len(p.sent) < maxCopiesInFlight && len(q.Chain) == 1 && q.Chain[0].Addr == p.sent[0].addr
}

// drain reads the destination's answers to the blocks in flight, in
// order, and hands each, as the answer to its request, to answer. Once
// the connection to the destination fails, every block still in flight
// fails with that error (*next is closed).
func (s *Server) drainCopies(p *copyPipe, next **hop, answer func(q *wire.DataReq, resp wire.DataResp)) {
	var broken error
	for _, c := range p.sent {
		var resp wire.DataResp
		err := broken
		if err == nil {
			var ioErr error
			if *next == nil {
				ioErr = errors.New("connection closed")
			} else {
				err, ioErr = awaitHop(*next)
			}
			if ioErr != nil {
				if *next != nil {
					(*next).nc.Close()
					*next = nil
				}
				broken, err = ioErr, ioErr
			}
		}
		if err != nil {
			resp = errResp(fmt.Errorf("replica on datanode %s: %w", c.addr, err))
		}
		answer(c.q, resp)
	}
	p.sent = p.sent[:0]
}

// awaitHop reads the next answer from h: refused is the datanode's
// refusal (nil: success), failed a failure to read the answer (the
// connection is of no further use).
func awaitHop(h *hop) (refused, failed error) {
	resp, err := wire.ReadDataResp(h.r)
	if err != nil {
		return nil, err
	}
	if resp.Status != wire.OK {
		return errors.New(resp.Msg), nil
	}
	return nil, nil
}
