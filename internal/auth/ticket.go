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
}

// Wire form: the fields in this order (little-endian), then the first 16
// bytes of the HMAC-SHA256 of all of them. Expiry stays at offset 29 (see
// TicketExpiry).
const ticketLen = 8 + 4 + 8 + 8 + 1 + 8 + 8 + 8 + 16

func (t *Ticket) body() []byte {
	b := make([]byte, 0, ticketLen)
	b = binary.LittleEndian.AppendUint64(b, t.Tag)
	b = binary.LittleEndian.AppendUint32(b, t.Node)
	b = binary.LittleEndian.AppendUint64(b, t.Start)
	b = binary.LittleEndian.AppendUint64(b, t.Count)
	if t.Write {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(t.Expiry))
	b = binary.LittleEndian.AppendUint64(b, t.Gen)
	return binary.LittleEndian.AppendUint64(b, t.MinGen)
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
		Write:  b[28] == 1,
		Expiry: int64(binary.LittleEndian.Uint64(b[29:])),
		Gen:    binary.LittleEndian.Uint64(b[37:]),
		MinGen: binary.LittleEndian.Uint64(b[45:]),
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
