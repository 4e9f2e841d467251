package clientx

import "github.com/plasmafs/plasma/client"

// Durability says when a commit is acknowledged.
type Durability int

const (
	// Durable commits are acknowledged once they survive a power cut.
	Durable Durability = iota
	// Async commits are acknowledged once applied (see Txn.CommitAsync).
	Async
)

// Auto returns a transaction of c whose first request also commits it, in
// the same round trip, with durability d. On failure nothing of it
// remains; if the connection is lost after the request was sent, the
// error matches ErrCommitUnknown. Meant for one namespace operation
// (LookupAt, CreateAt, RenameAt, SetAttr, …), not for file data.
func Auto(c *client.Client, d Durability) *client.Txn {
	return hooks.NewTxn(c, true, d == Async)
}
