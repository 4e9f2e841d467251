package namenode

// Readers report damaged replicas: a client whose read of a replica
// failed the committed checksum tells the namenode (OpReplicaDamaged,
// client/damaged.go). The namenode does not take a reader's word for it
// (any client may send the report): it has the replica's datanode check
// the block against its own recorded checksum (DataVerify), and only if
// the block fails it, and that checksum is the committed one, is the
// replica condemned, as a scrub finding is (condemn): the replicator copies
// the block from a good replica and trims the damaged one.

import (
	"context"
	"slices"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// maxVerifying bounds the readers' reports being verified at a time;
// reports beyond it are dropped (the reader reports again at its next
// failed read, the scrubber finds the damage anyway).
const maxVerifying = 8

// verifyTimeout bounds one verification.
const verifyTimeout = 30 * time.Second

// verifyReq is a replica (one block) a reader reported damaged.
type verifyReq struct {
	replica wire.Run
	crc     uint32 // the committed checksum
	addr    string
	ticket  []byte
}

func (n *Namenode) opReplicaDamaged(_ *conn, _ *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if len(q.Extents) != 1 || len(q.Extents[0].Replicas) != 1 || len(q.Extents[0].CRC) != 1 {
		return nil, fail(wire.ErrCodeInvalid, "damaged replica report without one replica and its checksum")
	}
	r, crc := q.Extents[0].Replicas[0], q.Extents[0].CRC[0]
	rp := n.repl
	if rp.verifying == nil {
		rp.verifying = map[wire.Run]bool{}
	}
	if _, known := rp.bad[r]; known || rp.verifying[r] || len(rp.verifying) >= maxVerifying {
		return &wire.Response{}, nil
	}
	in := n.ns.inodes[q.Ino]
	dn := n.nodes.get(r.Node)
	if in == nil || dn == nil || !dn.alive {
		return &wire.Response{}, nil
	}
	// Only a replica of the committed version, with its committed
	// checksum: a report about blocks that changed since is stale.
	i := slices.IndexFunc(in.blocks, func(x wire.Extent) bool { return x.Index <= q.Index && q.Index < x.Index+uint64(x.Count) })
	if i < 0 {
		return &wire.Response{}, nil
	}
	x := in.blocks[i]
	k := q.Index - x.Index
	if x.CRC[k] != crc || !slices.Contains(x.Replicas, wire.Run{Node: r.Node, Start: r.Start - k}) {
		return &wire.Response{}, nil
	}
	n.log.Info("reader reports a damaged replica, verifying it", "node", r.Node, "block", r.Start, "ino", q.Ino, "index", q.Index)
	n.startVerify(r, crc, x.Gen, dn.info.Addr)
	return &wire.Response{}, nil
}

// startVerify has replica r (one block, of generation gen at least, on
// the datanode at addr) checked against its committed checksum crc in the
// background, and condemned if it fails it. Called with n.mu held.
func (n *Namenode) startVerify(r wire.Run, crc uint32, gen uint64, addr string) {
	v := &verifyReq{replica: r, crc: crc, addr: addr}
	if n.cfg.TicketKey != nil {
		t := auth.Ticket{Tag: replicationTag, Node: r.Node, Start: r.Start, Count: 1, Expiry: time.Now().Add(verifyTimeout + time.Minute).Unix(),
			Gen: n.currentGen(), MinGen: gen}
		v.ticket = n.seal(t)
	}
	if n.repl.verifying == nil {
		n.repl.verifying = map[wire.Run]bool{}
	}
	n.repl.verifying[r] = true
	n.wg.Add(1)
	go n.verifyReported(v)
}

// verifyReported has the datanode check v's block and condemns the
// replica if it fails its recorded checksum, the committed one.
func (n *Namenode) verifyReported(v *verifyReq) {
	defer n.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var answer *wire.DataResp
	err := n.dataExchangeAnswers(ctx, v.addr, func(k int) *wire.DataReq {
		if k > 0 {
			return nil
		}
		return &wire.DataReq{Op: wire.DataVerify, Block: v.replica.Start, Count: 1, Ticket: v.ticket}
	}, func(p *wire.DataResp) { answer = p })
	damaged := err == nil && answer != nil && slices.Contains(answer.Bad, v.replica.Start) &&
		len(answer.CRCs) == 1 && answer.CRCs[0] == v.crc
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.repl.verifying, v.replica)
	switch {
	case err != nil:
		n.log.Warn("damaged replica reported by a reader could not be verified", "node", v.replica.Node, "block", v.replica.Start, "err", err)
	case damaged:
		n.condemn(v.replica, v.crc)
	default:
		n.log.Info("replica a reader reported damaged verified good by its datanode", "node", v.replica.Node, "block", v.replica.Start)
	}
}
