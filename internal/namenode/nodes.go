package namenode

import (
	"iter"
	"maps"
	"sort"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// nodeRegistry is the namenode's table of datanode volumes: those recorded
// in the store (live or not), by id and by identity, and the identities
// whose registration is waiting for the committer, with the id reserved
// for each. It decides ids and liveness; admitting a datanode over a
// connection and recording it are the namenode's (registry.go).
//
// Lock discipline: no mutex of its own; guarded by Namenode.mu, which
// every reader and writer holds (the committer's callbacks take it too).
type nodeRegistry struct {
	byID        map[uint32]*dnode
	byIdent     map[string]*dnode
	registering map[string]uint32 // identity → reserved id, until durable
	// removed holds the datanodes removed for good (nodesremove.go), by
	// identity: their ids are never handed out again, their volumes are
	// refused.
	removed map[string]uint32
	// turn is whose turn it is among datanodes with about as much free
	// space as the roomiest, for a new single-replica file (allocator.go).
	turn uint64
}

func newNodeRegistry() *nodeRegistry {
	return &nodeRegistry{byID: map[uint32]*dnode{}, byIdent: map[string]*dnode{}, registering: map[string]uint32{}, removed: map[string]uint32{}}
}

// add records a datanode the store holds (at start-up or once its
// registration is durable) and returns it; not alive until admitted.
func (r *nodeRegistry) add(d meta.Datanode) *dnode {
	dn := &dnode{Datanode: d, used: newBlockMap(d.Blocks)}
	r.byID[d.ID] = dn
	r.byIdent[d.Identity] = dn
	return dn
}

// remove forgets dn for good: its id is never handed out again and its
// identity stays refused (removed).
func (r *nodeRegistry) remove(dn *dnode) {
	delete(r.byID, dn.ID)
	delete(r.byIdent, dn.Identity)
	r.removed[dn.Identity] = dn.ID
}

// get returns the datanode with id, or nil.
func (r *nodeRegistry) get(id uint32) *dnode { return r.byID[id] }

// lookup returns the datanode with identity, or nil.
func (r *nodeRegistry) lookup(identity string) *dnode { return r.byIdent[identity] }

// all yields every recorded datanode, in no order.
func (r *nodeRegistry) all() iter.Seq[*dnode] { return maps.Values(r.byID) }

// count is the number of recorded datanodes.
func (r *nodeRegistry) count() int { return len(r.byID) }

// live returns the datanodes blocks may be allocated on: alive and enabled.
func (r *nodeRegistry) live() []*dnode {
	var out []*dnode
	for _, dn := range r.byID {
		if dn.alive && dn.Enabled {
			out = append(out, dn)
		}
	}
	return out
}

// list describes every recorded datanode, by id.
func (r *nodeRegistry) list() []wire.NodeInfo {
	out := make([]wire.NodeInfo, 0, len(r.byID))
	for _, dn := range r.byID {
		out = append(out, dn.nodeInfo())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// nextID is the id a new datanode gets: above every recorded and every
// reserved one, so two registrations in flight never share an id.
func (r *nodeRegistry) nextID() uint32 {
	next := uint32(1)
	for k := range r.byID {
		next = max(next, k+1)
	}
	for _, k := range r.registering {
		next = max(next, k+1)
	}
	for _, k := range r.removed {
		next = max(next, k+1)
	}
	return next
}

// reserve marks identity as being registered with id; false if it is
// already (one registration per identity at a time).
func (r *nodeRegistry) reserve(identity string, id uint32) bool {
	if _, busy := r.registering[identity]; busy {
		return false
	}
	r.registering[identity] = id
	return true
}

// reserved reports whether identity's registration is in flight.
func (r *nodeRegistry) reserved(identity string) bool {
	_, busy := r.registering[identity]
	return busy
}

// unreserve ends identity's registration, recorded or failed.
func (r *nodeRegistry) unreserve(identity string) { delete(r.registering, identity) }

// disconnect marks dead the datanodes served over c and returns them.
func (r *nodeRegistry) disconnect(c *conn) []*dnode {
	var gone []*dnode
	for _, dn := range r.byID {
		if dn.conn == c {
			dn.alive = false
			dn.conn = nil
			gone = append(gone, dn)
		}
	}
	return gone
}
