package namenode

import (
	"sort"
	"time"
)

// Status is a snapshot of the namenode's state for its status page and
// metrics.
type Status struct {
	Time      time.Time
	Cluster   string
	Blocksize uint32
	Datanodes []DatanodeStatus // by id
	OpenTxns  int
	Locks     int
	Leases    int
	// Counters since the namenode started.
	Commits    uint64
	Batches    uint64
	Requests   uint64
	LeaseWaits uint64
	// Health: under-replicated and damaged blocks, as last counted.
	Health BlockHealth
}

// DatanodeStatus describes one recorded datanode.
type DatanodeStatus struct {
	ID       uint32
	Identity string
	Addr     string // data protocol address ("" if it never registered since the namenode started)
	Blocks   uint64
	Used     uint64
	Alive    bool
	Enabled  bool
	LastSeen time.Time // last heartbeat or registration (zero: none since the namenode started)
}

// Status returns a snapshot of the namenode's state.
func (n *Namenode) Status() Status {
	st := Status{Time: time.Now(), Cluster: n.cfg.Cluster, Blocksize: n.cfg.Blocksize,
		Commits: n.commits.Load(), Batches: n.cm.batches.Load(), Requests: n.srv.requests.Load()}
	n.mu.Lock()
	st.OpenTxns = n.txns.count()
	st.Locks = n.locks.held()
	st.Leases = n.leases.held()
	st.LeaseWaits = n.leases.putOff
	st.Health = n.blockHealth()
	for dn := range n.nodes.all() {
		ni := dn.nodeInfo() // a sparse volume's capacity and use in whole blocks (space.go)
		st.Datanodes = append(st.Datanodes, DatanodeStatus{ID: dn.ID, Identity: dn.Identity, Addr: dn.info.Addr, Blocks: ni.Blocks,
			Used: ni.Used, Alive: dn.alive, Enabled: dn.Enabled, LastSeen: dn.lastSeen})
	}
	n.mu.Unlock()
	sort.Slice(st.Datanodes, func(i, j int) bool { return st.Datanodes[i].ID < st.Datanodes[j].ID })
	return st
}
