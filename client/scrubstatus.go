package client

import (
	"context"
	"fmt"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
)

// ScrubProgress is how far a datanode's scrubber got (its checksum check
// of every written block, one pass per -scrub-interval), as its last
// heartbeat told the namenode.
type ScrubProgress struct {
	ID       uint32
	Identity string
	// LastPass is when its last full pass ended (zero: none since the
	// datanode started); Verified the written blocks that pass checked.
	LastPass time.Time
	Verified uint64
	// Passed is how many of the volume's Blocks the current pass has
	// gone through.
	Passed uint64
	Blocks uint64
}

// scrubPerNode is how many counters each datanode has in the namenode's
// answer (namenode/scrubstatus.go).
const scrubPerNode = 4

// ScrubStatus asks the namenode how far each datanode's scrubber got
// (superuser).
func (c *Client) ScrubStatus(ctx context.Context) ([]ScrubProgress, error) {
	r, err := c.call(ctx, &wire.Request{Op: wire.OpNodeAdmin, Path: "scrub"})
	if err != nil {
		return nil, err
	}
	if len(r.Counters) != scrubPerNode*len(r.Nodes) {
		return nil, fmt.Errorf("scrub status: the namenode answered %d counters for %d datanodes", len(r.Counters), len(r.Nodes))
	}
	out := make([]ScrubProgress, len(r.Nodes))
	for i, n := range r.Nodes {
		v := r.Counters[scrubPerNode*i:]
		out[i] = ScrubProgress{ID: n.ID, Identity: n.Identity, Verified: v[2], Passed: v[3], Blocks: n.Blocks}
		if v[1] != 0 {
			out[i].LastPass = time.Unix(0, int64(v[1]))
		}
	}
	return out, nil
}
