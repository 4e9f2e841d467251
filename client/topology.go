package client

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
func (f *File) SetTopology(t Topology) { f.w.topology = t }
