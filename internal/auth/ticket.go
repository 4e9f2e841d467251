package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Ticket lets the bearer read or write a range of blocks on one datanode.
// The namenode makes it with the ticket key it shares with the datanodes,
// which check it without asking the namenode. Tag identifies the
// transaction: when the transaction ends, the namenode tells the datanodes
// to refuse its tag.
//
// Gen is a block generation (the namenode's allocation counter, which only
// grows, across its restarts too). A write ticket carries the generation of
// its allocation and a datanode stores it with each block written; a read
// ticket carries the namenode's generation when it was issued. A datanode
// refuses a write of a block holding a newer generation and a read of one
// holding a generation newer than the ticket's: once a freed block's next
// owner has written it, no ticket issued before that allocation opens it,
// whether or not the datanode learnt of the revocation (restarts of either
// side forget revocations).
type Ticket struct {
	Tag    uint64
	Node   uint32
	Start  uint64
	Count  uint64
	Write  bool
	Expiry int64 // unix seconds
	Gen    uint64
	// MinGen (read tickets): every block read must hold at least this
	// generation, the one of the allocation that made it; a block
	// attached to a file without being written (it still holds its
	// previous owner's data, with an older generation) is refused.
	MinGen uint64
	// Append tickets (Write false) let the bearer extend one committed
	// block in place: write bytes at offsets ≥ From (its committed length)
	// and nothing before, so every committed version of the block, a prefix
	// of it, stays readable. Such a ticket neither reads nor writes whole
	// blocks. In a read ticket, From (if not 0) limits reads of the
	// ticket's last block, a file's partly filled last block, to its first
	// From bytes: the version the ticket was issued for.
	Append bool
	From   uint64
	// Seq (write and append tickets) is a generation the namenode drew
	// when it issued the ticket. A datanode refuses a ticket that writes
	// if it was issued before the datanode last registered with the
	// namenode, which tells it a newer generation: revocations are kept in
	// memory on both sides, so after a restart of either the datanode
	// cannot tell a ticket of an ended transaction from a live one, and
	// refuses both (a live transaction asks for new tickets). Seq also
	// orders the grants of a block's extensions: a datanode refuses an
	// append ticket older than one it applied to the block, so a ticket
	// whose transaction ended cannot write over a later extension.
	Seq uint64
	// Term is the namenode group's term in which the issuing namenode
	// led (0 for a single namenode). A datanode keeps the highest term it
	// has seen (from registrations and tickets) and refuses a ticket that
	// writes with a lower one: a deposed leader's tickets write nothing,
	// whatever generations the leaders drew (see ErrTicketTermOutdated).
	Term uint64
}

// Wire form: the fields in this order (little-endian; Write and Append
// share one byte: 0 read, 1 write, 2 append), then the first 16 bytes of
// the HMAC-SHA256 of all of them. Expiry stays at offset 29 (see
// TicketExpiry). Tickets of the form before terms (8 bytes shorter) are
// refused as forged, as those before generations were: namenodes and
// datanodes are upgraded together.
const ticketLen = 8 + 4 + 8 + 8 + 1 + 8 + 8 + 8 + 8 + 8 + 8 + 16

// Ticket kinds, the byte at offset 28.
const (
	kindRead   = 0
	kindWrite  = 1
	kindAppend = 2
)

func (t *Ticket) body() []byte {
	b := make([]byte, 0, ticketLen)
	b = binary.LittleEndian.AppendUint64(b, t.Tag)
	b = binary.LittleEndian.AppendUint32(b, t.Node)
	b = binary.LittleEndian.AppendUint64(b, t.Start)
	b = binary.LittleEndian.AppendUint64(b, t.Count)
	switch {
	case t.Write:
		b = append(b, kindWrite)
	case t.Append:
		b = append(b, kindAppend)
	default:
		b = append(b, kindRead)
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(t.Expiry))
	b = binary.LittleEndian.AppendUint64(b, t.Gen)
	b = binary.LittleEndian.AppendUint64(b, t.MinGen)
	b = binary.LittleEndian.AppendUint64(b, t.From)
	b = binary.LittleEndian.AppendUint64(b, t.Seq)
	return binary.LittleEndian.AppendUint64(b, t.Term)
}

// Seal returns the ticket's wire form, MACed with key.
func (t *Ticket) Seal(key []byte) []byte {
	b := t.body()
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(b)[:ticketLen]
}

// Ticket errors.
var (
	ErrTicketForged  = errors.New("ticket forged or damaged")
	ErrTicketExpired = errors.New("ticket expired")
	ErrTicketRange   = errors.New("ticket does not cover this request")
	ErrTicketRevoked = errors.New("ticket's transaction has ended")
	// ErrTicketStale: the block holds a newer generation than the ticket
	// (it was freed and reallocated after the ticket was issued).
	ErrTicketStale = errors.New("ticket is older than the block (freed and reallocated since it was issued)")
	// ErrTicketOutdated: a write or append ticket issued before the
	// datanode last registered with the namenode (see Seq).
	ErrTicketOutdated = errors.New("ticket is older than the datanode's registration with the namenode (issued before a restart of either; its transaction may have ended): ask the namenode for a new one")
	// ErrTicketTermOutdated: a write or append ticket of a namenode group
	// term below the highest the datanode has seen: issued by a leader
	// since deposed. It wraps ErrTicketOutdated (a live transaction asks
	// the current leader for new tickets).
	ErrTicketTermOutdated = fmt.Errorf("%w; it was issued by a namenode group leader since deposed (an older term)", ErrTicketOutdated)
)

// OpenTicket checks the MAC of a wire ticket and decodes it.
func OpenTicket(key, b []byte) (*Ticket, error) {
	if len(b) != ticketLen {
		return nil, ErrTicketForged
	}
	m := hmac.New(sha256.New, key)
	m.Write(b[:ticketLen-16])
	if !hmac.Equal(m.Sum(nil)[:16], b[ticketLen-16:]) {
		return nil, ErrTicketForged
	}
	t := &Ticket{
		Tag:    binary.LittleEndian.Uint64(b),
		Node:   binary.LittleEndian.Uint32(b[8:]),
		Start:  binary.LittleEndian.Uint64(b[12:]),
		Count:  binary.LittleEndian.Uint64(b[20:]),
		Write:  b[28] == kindWrite,
		Append: b[28] == kindAppend,
		Expiry: int64(binary.LittleEndian.Uint64(b[29:])),
		Gen:    binary.LittleEndian.Uint64(b[37:]),
		MinGen: binary.LittleEndian.Uint64(b[45:]),
		From:   binary.LittleEndian.Uint64(b[53:]),
		Seq:    binary.LittleEndian.Uint64(b[61:]),
		Term:   binary.LittleEndian.Uint64(b[69:]),
	}
	if b[28] > kindAppend {
		return nil, ErrTicketForged
	}
	return t, nil
}

// Check verifies that the ticket allows the request.
func (t *Ticket) Check(node uint32, block, count uint64, write bool, now time.Time) error {
	if now.Unix() > t.Expiry {
		return ErrTicketExpired
	}
	if t.Node != node || block < t.Start || block+count > t.Start+t.Count || count == 0 {
		return fmt.Errorf("%w: blocks %d+%d on datanode %d, ticket covers %d+%d on datanode %d", ErrTicketRange, block, count, node, t.Start, t.Count, t.Node)
	}
	if write && !t.Write {
		return fmt.Errorf("%w: read-only ticket used for a write", ErrTicketRange)
	}
	if !write && t.Append {
		return fmt.Errorf("%w: an append ticket only extends a block", ErrTicketRange)
	}
	return nil
}

// CheckAppend verifies that the ticket allows writing block's bytes from
// offset off on node.
func (t *Ticket) CheckAppend(node uint32, block, off uint64, now time.Time) error {
	if now.Unix() > t.Expiry {
		return ErrTicketExpired
	}
	if !t.Append {
		return fmt.Errorf("%w: not an append ticket", ErrTicketRange)
	}
	if t.Node != node || block < t.Start || block >= t.Start+t.Count {
		return fmt.Errorf("%w: block %d on datanode %d, ticket covers %d+%d on datanode %d", ErrTicketRange, block, node, t.Start, t.Count, t.Node)
	}
	if off < t.From {
		return fmt.Errorf("%w: append at offset %d, before the block's committed length %d", ErrTicketRange, off, t.From)
	}
	return nil
}

// TicketExpiry returns when a wire ticket expires, without checking it:
// clients, which do not hold the key, use it to refresh tickets in time.
func TicketExpiry(b []byte) (time.Time, bool) {
	if len(b) != ticketLen {
		return time.Time{}, false
	}
	return time.Unix(int64(binary.LittleEndian.Uint64(b[29:])), 0), true
}
