package nfsbridge

// retransmitWindow is how many of a connection's latest calls are
// remembered to recognise their retransmissions. A client retransmits a
// call it has had no reply to within its timeout (go-nfs-client: 5s,
// Linux: timeo), so only calls still in progress or just answered are
// retransmitted: a client with that many calls outstanding at once is far
// beyond any NFS client's slot table.
const retransmitWindow = 1024

// seenCalls recognises a retransmission on one connection: a call with
// the xid of a call read before on the same connection (RFC 5531: a
// retransmission keeps its xid). The first call's reply goes, or went,
// out on this connection, which TCP delivers; the retransmission is
// dropped, not run again.
//
// Running it again would do a non-idempotent procedure twice (a CREATE
// GUARDED, REMOVE or RENAME would answer EEXIST or ENOENT for what the
// first call did) and answer one call twice. Calls wait out a failover
// of the namenode (vfs), longer than a client's timeout, so every call
// in flight then was retransmitted and run twice; go-nfs-client stops
// reading replies for good when a call is answered twice (its receiver
// blocks on the reply channel of a call that has returned).
//
// A retransmission on a new connection (the client reconnected) is run:
// the reply of the first went out on the connection that is gone.
type seenCalls struct {
	xids [retransmitWindow]uint32
	next int                 // where the next xid goes in xids
	n    int                 // how many of xids are filled
	set  map[uint32]struct{} // the xids in xids
}

// retransmitted reports whether xid was seen among the connection's
// latest calls; if not, it is remembered.
func (s *seenCalls) retransmitted(xid uint32) bool {
	if s.set == nil {
		s.set = make(map[uint32]struct{}, retransmitWindow)
	}
	if _, ok := s.set[xid]; ok {
		return true
	}
	if s.n == retransmitWindow {
		delete(s.set, s.xids[s.next])
	} else {
		s.n++
	}
	s.xids[s.next] = xid
	s.set[xid] = struct{}{}
	s.next = (s.next + 1) % retransmitWindow
	return false
}
