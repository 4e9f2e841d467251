package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/plasmafs/plasma/client"
)

// The scrubbers' progress in 'plasma admin datanodes' and 'plasma fsck'.

// scrubByNode asks for the scrubbers' progress, by datanode id; nil (and
// a note on stderr) if the namenode could not say.
func scrubByNode(ctx context.Context, c *client.Client, prog string) map[uint32]client.ScrubProgress {
	ps, err := c.ScrubStatus(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "plasma %s: the scrubbers' progress could not be read: %v\n", prog, err)
		return nil
	}
	out := make(map[uint32]client.ScrubProgress, len(ps))
	for _, p := range ps {
		out[p.ID] = p
	}
	return out
}

// scrubText says how far a scrubber got: its last full pass and how far
// the current one is.
func scrubText(p client.ScrubProgress, now time.Time) string {
	last := "no full pass yet"
	if !p.LastPass.IsZero() {
		last = fmt.Sprintf("full pass %s ago, %d blocks verified", now.Sub(p.LastPass).Round(time.Second), p.Verified)
	}
	if p.Passed == 0 || p.Blocks == 0 {
		return last
	}
	return fmt.Sprintf("%s; now %.0f%% through", last, 100*float64(p.Passed)/float64(p.Blocks))
}

// printScrub prints each datanode's scrubber progress, one line each.
func printScrub(w io.Writer, ps map[uint32]client.ScrubProgress, nodes []client.DatanodeStatus) {
	now := time.Now()
	for _, n := range nodes {
		if p, ok := ps[n.ID]; ok {
			fmt.Fprintf(w, "scrub: datanode %d (%s): %s\n", n.ID, escapeName(n.Identity), scrubText(p, now))
		}
	}
}
