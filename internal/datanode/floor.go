package datanode

import "sync"

// writeFloor is the least sequence number (auth.Ticket.Seq) a ticket that
// writes (a write or an append ticket) must carry: a generation the
// namenode drew when this datanode last registered with it, larger than
// that of every ticket issued before.
//
// Revocations of ended transactions live in memory on both sides, so a
// restart of either forgets some: a datanode forgets those it was told,
// a namenode those it had not sent yet. The floor stands in for all of
// them: a ticket issued before the registration is refused whether its
// transaction ended or not. A transaction still open then gets fresh
// tickets (the client allocates again, or copies instead of extending).
// Read tickets are not held to it: their readers could not read through a
// datanode restart while the namenode is away, and the generations of the
// blocks keep them from anything reallocated since (see auth.Ticket).
//
// Until the namenode has answered a registration (after a start, or while
// the connection to it is lost) no ticket that writes is accepted: the
// datanode does not know which are current.
type writeFloor struct {
	mu  sync.Mutex
	seq uint64
}

// refusing, as the floor, refuses every ticket.
const refusing = ^uint64(0)

// refuseAll refuses every ticket until raise.
func (f *writeFloor) refuseAll() {
	f.mu.Lock()
	f.seq = refusing
	f.mu.Unlock()
}

// raise refuses, from now on, tickets with a sequence number below seq;
// it never lowers the floor, except from refusing all.
func (f *writeFloor) raise(seq uint64) {
	f.mu.Lock()
	if f.seq == refusing || seq > f.seq {
		f.seq = seq
	}
	f.mu.Unlock()
}

// admits reports whether a ticket with sequence number seq may write, and
// the floor.
func (f *writeFloor) admits(seq uint64) (bool, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq != refusing && seq >= f.seq, f.seq
}
