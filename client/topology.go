package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/plasmafs/plasma/internal/wire"
)

// Topology is how a write reaches a block's replicas (the original's
// copy_in topology).
type Topology int

const (
	// Chain (the default): the client sends each block to the first
	// replica's datanode, which stores it and forwards it to the next.
	// The client's upload bandwidth is spent once, whatever the
	// replication.
	Chain Topology = iota
	// Star: the client sends each block to every replica's datanode
	// itself, in parallel. No datanode forwards; the client's upload
	// bandwidth is spent once per replica, the datanodes' once each.
	Star
)

func (t Topology) String() string {
	if t == Star {
		return "star"
	}
	return "chain"
}

// SetTopology chooses how the file's writes reach their replicas; call it
// before the first write (the background flush reads it unlocked).
func (f *File) SetTopology(t Topology) { f.topology = t }

// writeReplicas writes a run of blocks to every replica of extent x in
// the file's topology: along the chain, or to each replica directly.
func (f *File) writeReplicas(ctx context.Context, x wire.Extent, addrs []string, starts []uint64, blocks [][]byte, crcs []uint32) error {
	c := f.tx.c
	if f.topology != Star || len(addrs) < 2 {
		first, _ := c.node(x.Replicas[0].Node)
		return c.data.writeRun(ctx, f.tx.reqID(), addrs, starts, x.Tickets, blocks, crcs, f.bs, c.localWriteFile(first, starts[0], ticketAt(x.Tickets, 0)))
	}
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for k := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, _ := c.node(x.Replicas[k].Node)
			ticket := ticketAt(x.Tickets, k)
			errs[k] = c.data.writeRun(ctx, f.tx.reqID(), addrs[k:k+1], starts[k:k+1], [][]byte{ticket}, blocks, crcs, f.bs, c.localWriteFile(n, starts[k], ticket))
		}()
	}
	wg.Wait()
	// Every replica that failed is to blame (the caller excludes them and
	// allocates again).
	var we writeError
	for _, err := range errs {
		if err == nil {
			continue
		}
		if e, ok := err.(*writeError); ok {
			we.blame = append(we.blame, e.blame...)
		}
		if we.err == nil {
			we.err = err
		} else {
			we.err = fmt.Errorf("%w; %v", we.err, err)
		}
	}
	if we.err != nil {
		return &we
	}
	return nil
}
