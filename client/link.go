package client

import (
	"context"

	"github.com/plasmafs/plasma/internal/clientlink"
	"github.com/plasmafs/plasma/internal/wire"
)

// The machinery of the module's own frontends (internal/clientx) works on
// the client's state through these hooks, so that it need not be exported
// (see internal/clientlink).
func init() {
	clientlink.Set(&clientlink.Hooks[*Client, *Txn, *File, FileInfo]{
		Call:   (*Client).call,
		TxCall: (*Txn).call,
		InfoOf: infoOf,
		NewTxn: func(c *Client, auto, async bool) *Txn {
			return &Txn{c: c, id: c.nextTx.Add(1), auto: auto, async: async}
		},
		CreateReq: (*Txn).createReq,
		SetOwner:  func(tx *Txn, user, group string) { tx.owner, tx.group = user, group },
		Lost:      (*Txn).lost,
		LeaseCall: (*Client).leaseCall,
		Generation: func(c *Client) uint64 {
			_, gen := c.conn()
			return gen
		},
		Requests:       (*Client).namenodeRequests,
		Addr:           (*Client).namenodeAddr,
		SetFlushBlocks: (*File).setFlushBlocks,
		ReadAtShared:   (*File).readAtShared,
	})
}

// leaseCall sends a directory lease request on the current connection,
// without transaction or retry: a lease belongs to the connection it was
// granted on, whose generation it returns.
func (c *Client) leaseCall(ctx context.Context, q *wire.Request) (*wire.Response, uint64, error) {
	nn, gen := c.conn()
	r, err := nn.Call(ctx, q)
	if err != nil {
		return nil, 0, err
	}
	if err := c.noteResponse(r); err != nil {
		return nil, 0, err
	}
	return r, gen, nil
}
