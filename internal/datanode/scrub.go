package datanode

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// Scrubbing: the datanode reads every written block of its volume in the
// background, at most ScrubRate bytes a second, one pass per
// ScrubInterval, and reports a block whose data does not match its
// recorded checksum to the namenode (with that checksum, so the namenode
// acts only if it is the committed version's), which replaces the replica
// from a good one before anybody reads it.

// scrubProgress is how far the scrubber got: when its last full pass
// ended and how many written blocks it verified, and how far the current
// pass is. The heartbeats carry it to the namenode (plasma admin
// datanodes, plasma fsck).
type scrubProgress struct {
	lastPass   atomic.Int64  // end of the last full pass (Unix ns; 0: none yet)
	lastBlocks atomic.Uint64 // written blocks it verified
	passed     atomic.Uint64 // blocks of the volume the current pass has passed
	verified   atomic.Uint64 // written blocks the current pass verified so far
}

// report puts the progress into heartbeat q (wire.OpHeartbeat) and
// returns q.
func (p *scrubProgress) report(q *wire.Request) *wire.Request {
	q.Mtime, q.Count, q.Index = p.lastPass.Load(), p.lastBlocks.Load(), p.passed.Load()
	return q
}

// badBlock is a damaged block found by the scrubber.
type badBlock struct {
	block uint64
	crc   uint32 // the checksum recorded for it, which its data fails
}

// ScrubCheck reads block under its stripe lock (no write is half done)
// and reports whether it is written (checked) and fails its recorded
// checksum, with that checksum. Blocks never written are not checked.
// buf holds a block.
func (s *BlockStore) ScrubCheck(block uint64, buf []byte) (checked, bad bool, crc uint32, err error) {
	if err := s.check(block, 1); err != nil {
		return false, false, 0, err
	}
	m := s.stripe(block)
	m.Lock()
	defer m.Unlock()
	s.mu.RLock()
	gen, crc := s.gens[block], s.crcs[block]
	s.mu.RUnlock()
	if gen == 0 && crc == 0 {
		return false, false, 0, nil
	}
	if _, _, err := s.ReadN(block, buf, NoTicket); err != nil {
		if errors.Is(err, ErrChecksum) {
			return true, true, crc, nil
		}
		return false, false, 0, err
	}
	return true, false, crc, nil
}

// scrub runs passes over the volume until the server stops.
func (s *Server) scrub() {
	defer s.wg.Done()
	buf := make([]byte, s.store.Config.Blocksize)
	bs := float64(s.store.Config.Blocksize)
	// The first pass starts half an interval to an interval after start:
	// datanodes started together do not scrub together, and one that
	// restarts often still scrubs.
	first := s.cfg.ScrubInterval/2 + rand.N(s.cfg.ScrubInterval/2+1)
	if !s.sleepUntil(time.Now().Add(first)) {
		return
	}
	p := &s.scrubbed
	for {
		start := time.Now()
		p.passed.Store(0)
		p.verified.Store(0)
		var read float64 // bytes on disk of the blocks before b (sparse volumes: their pages)
		for b := uint64(0); b < s.store.Config.Blocks; b++ {
			// Paced: block b may start once the bytes before it at the
			// rate have passed since the pass began.
			if !s.sleepUntil(start.Add(time.Duration(read / float64(s.cfg.ScrubRate) * float64(time.Second)))) {
				return
			}
			read += bs
			if s.store.Sparse() {
				read += float64(s.store.onDiskBytes(b)) - bs
			}
			checked, bad, crc, err := s.store.ScrubCheck(b, buf)
			p.passed.Store(b + 1)
			if checked {
				p.verified.Add(1)
			}
			if err != nil {
				s.log.Warn("scrub: block could not be read", "block", b, "err", err)
				continue
			}
			if bad {
				s.log.Error("scrub: block does not match its checksum, reporting it to the namenode", "block", b, "crc", crc)
				select {
				case s.bad <- badBlock{b, crc}:
				default: // reported again in the next pass
				}
			}
		}
		p.lastBlocks.Store(p.verified.Load())
		p.lastPass.Store(time.Now().UnixNano())
		p.passed.Store(0) // until the next pass starts
		if !s.sleepUntil(start.Add(s.cfg.ScrubInterval)) {
			return
		}
	}
}

// sleepUntil waits until t; false if the server stopped meanwhile.
func (s *Server) sleepUntil(t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-s.stop:
			return false
		default:
			return true
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-s.stop:
		return false
	case <-timer.C:
		return true
	}
}

// reportBad tells the namenode of the damaged blocks the scrubber found
// (OpBadBlock, one request each: they are rare). A failure is logged; the
// block is reported again in the next pass.
func (s *Server) reportBad(c *rpc.Conn) {
	for {
		select {
		case b := <-s.bad:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := c.Call(ctx, &wire.Request{Op: wire.OpBadBlock, Node: &wire.NodeInfo{Identity: s.store.Config.Identity}, Index: b.block, Count: uint64(b.crc)})
			cancel()
			if err == nil && resp.Code != wire.OK {
				err = errors.New(resp.Msg)
			}
			if err != nil {
				s.log.Warn("scrub: damaged block not reported to the namenode", "block", b.block, "err", err)
				return
			}
		default:
			return
		}
	}
}
