package namenode

import "github.com/plasmafs/plasma/internal/wire"

// scrubReport is how far a datanode's scrubber got, as its last heartbeat
// said (datanode/scrub.go).
type scrubReport struct {
	lastPass   int64  // end of its last full pass (Unix ns; 0: none since it started)
	lastBlocks uint64 // written blocks that pass verified
	passed     uint64 // blocks of the volume the current pass has passed
}

// scrubPerNode is how many counters each datanode has in a scrub answer.
const scrubPerNode = 4

// scrubStatus answers OpNodeAdmin "scrub": the datanodes (Nodes) and, for
// each, its id, the end of its scrubber's last full pass, the blocks that
// pass verified and how far the current pass is (Counters).
func (n *Namenode) scrubStatus() *wire.Response {
	nodes := n.nodeList()
	c := make([]uint64, 0, scrubPerNode*len(nodes))
	for _, ni := range nodes {
		s := n.nodes.get(ni.ID).scrub
		c = append(c, uint64(ni.ID), uint64(s.lastPass), s.lastBlocks, s.passed)
	}
	return &wire.Response{Nodes: nodes, Counters: c}
}
