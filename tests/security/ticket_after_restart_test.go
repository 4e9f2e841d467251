package security

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/blockcrc"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Tickets of ended transactions across restarts (issue 19 item 2).
// Revocations live in memory: a restarted datanode forgets those it was
// told, a restarted namenode those it had not sent yet. Mallory keeps the
// write tickets of a transaction that wrote and committed a file, and the
// append tickets of one that extended another file in place and
// committed; after the restart she replays them over the committed bytes.
// Every replay must be refused, every replica must keep its committed
// bytes, and writing (also in a transaction open across a datanode
// restart) must go on working.
//
// Failed before the fix (datanodes restarting, both restarting): the old
// write tickets were accepted and overwrote the committed blocks on every
// replica; with only the namenode restarting (its revocation never sent)
// likewise.
func TestEndedTicketsAfterRestart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("mkdir", "/m")
	c.MustRun("chmod", "777", "/m")
	malCred := c.IssueCredential("mallory", auth.RoleUser)
	for i, mode := range []string{"datanodes restart", "namenode restarts", "both restart"} {
		t.Run(strings.ReplaceAll(mode, " ", "-"), func(t *testing.T) {
			endedTicketsAfter(t, c, malCred, mode, fmt.Sprintf("/m/%d", i))
		})
	}
}

// committedWithTickets is what mallory committed and the tickets she kept.
type committedWithTickets struct {
	whole, appended     string // paths: written with write tickets; extended in place
	wholeData, appData  []byte // their committed content
	writes              []heldTicket
	appends             []heldTicket
	appendFrom, appBase int // the append tickets' offset; the committed version's length
}

func endedTicketsAfter(t *testing.T, c *clustertest.Procs, malCred, mode, prefix string) {
	ctx := context.Background()
	cred, err := auth.LoadCredential(malCred)
	testkit.MustOK(t, "credential", err)
	s := commitKeepingTickets(t, c, malCred, prefix, mode == "namenode restarts")
	var open *openWrite
	if mode == "datanodes restart" {
		open = beginOpenWrite(t, c, malCred, prefix+"-open")
	}

	switch mode {
	case "datanodes restart":
		for _, p := range c.DNs {
			c.Kill(p)
			c.StartDatanode(p)
		}
	case "namenode restarts":
		// The datanodes were frozen before the commits (see
		// commitKeepingTickets): the revocations die with the namenode.
		c.Kill(c.NN)
		c.StartNamenode()
		for _, p := range c.DNs {
			c.Continue(p)
		}
	case "both restart":
		for _, p := range c.DNs {
			c.Kill(p)
		}
		c.Kill(c.NN)
		c.StartNamenode()
		for _, p := range c.DNs {
			c.StartDatanode(p)
		}
	}
	c.WaitLive(len(c.DNs))

	bs := int(c.Opts.Blocksize)
	evil := bytes.Repeat([]byte("MALLORY WAS HERE "), bs/17+1)[:bs]
	refused := func(what string, h heldTicket, r *wire.DataResp) {
		t.Helper()
		if r.Status == wire.OK {
			t.Errorf("%s with the ticket of an ended transaction: block %d on %s accepted", what, h.block, h.addr)
		} else if !strings.Contains(r.Msg, "older than the datanode's registration") && !strings.Contains(r.Msg, auth.ErrTicketRevoked.Error()) {
			// Revoked: the namenode kept the revocation the datanode had
			// not received before its restart, and sent it afterwards.
			t.Errorf("%s with the ticket of an ended transaction: refused for another reason: %s", what, r.Msg)
		}
	}
	for _, h := range s.writes {
		refused("a write", h, testkit.DataCall(t, h.addr, cred, &wire.DataReq{Op: wire.DataWrite, Block: h.block, Length: uint32(bs), CRC: testkit.BlockCRC(evil, bs), Ticket: h.ticket}, evil))
		refused("an adoption", h, testkit.DataCall(t, h.addr, cred, &wire.DataReq{Op: wire.DataAdopt, Block: h.block, Length: uint32(bs), CRC: testkit.BlockCRC(evil, bs), Ticket: h.ticket}, nil))
	}
	// The append tickets, at their offset, over the committed extension,
	// based on the committed version (the base is the requester's to
	// name).
	// The checksum the datanode checks: the base's, with the data placed
	// at the offset (blockcrc.Placed is affine).
	bad := evil[:s.appBase-s.appendFrom]
	crc := testkit.BlockCRC(s.appData, bs) ^ blockcrc.Placed(s.appendFrom, bad, bs) ^ blockcrc.ZeroExtend(0, uint64(bs))
	for _, h := range s.appends {
		refused("an extension", h, testkit.DataCall(t, h.addr, cred, &wire.DataReq{Op: wire.DataExtend, Block: h.block, Length: uint32(len(bad)),
			CRC: crc, Ticket: h.ticket, Offset: uint32(s.appendFrom), Base: testkit.BlockCRC(s.appData, bs)}, bad))
	}

	// Every replica holds the committed bytes.
	conn := testkit.RawAs(t, c, malCred)
	replicasHold(t, conn, cred, s.whole, s.wholeData, bs)
	replicasHold(t, conn, cred, s.appended, s.appData, bs)
	admin := c.Client(client.Config{})
	defer admin.Close()
	testkit.FsckClean(t, admin)

	if open != nil {
		open.finish(t, c, cred)
	}

	// Writing goes on: a new file, and, across a datanode restart, a
	// transaction that wrote before it and writes after it.
	mallory := c.Client(client.Config{CredentialFile: malCred})
	defer mallory.Close()
	fresh := testkit.SeededBytes(3*bs+100, 7)
	testkit.WriteFile(t, mallory, prefix+"-after", fresh, 2)
	if got := testkit.ReadFile(t, admin, prefix+"-after"); !bytes.Equal(got, fresh) {
		t.Fatalf("%s-after reads differently", prefix)
	}
	if mode == "datanodes restart" {
		first, second := testkit.SeededBytes(2*bs+5, 8), testkit.SeededBytes(2*bs, 9)
		testkit.MustOK(t, "a transaction across a datanode restart", mallory.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.CreateFile(ctx, prefix+"-across", client.CreateOptions{Rep: 2})
			if err != nil {
				return err
			}
			if _, err := f.Write(first); err != nil {
				return err
			}
			if err := f.Flush(ctx); err != nil {
				return err
			}
			for _, p := range c.DNs {
				c.Kill(p)
				c.StartDatanode(p)
			}
			c.WaitLive(len(c.DNs))
			_, err = f.Write(second)
			return err
		}))
		want := append(bytes.Clone(first), second...)
		if got := testkit.ReadFile(t, admin, prefix+"-across"); !bytes.Equal(got, want) {
			t.Fatalf("%s-across reads differently", prefix)
		}
	}
}

// commitKeepingTickets has mallory write one file with write tickets she
// keeps, and extend another in place with append tickets she keeps, each
// in a transaction that commits. With freeze, the datanodes are frozen
// (SIGSTOP) before the commits, so no revocation reaches them.
func commitKeepingTickets(t *testing.T, c *clustertest.Procs, malCred, prefix string, freeze bool) *committedWithTickets {
	t.Helper()
	bs := int(c.Opts.Blocksize)
	cred, err := auth.LoadCredential(malCred)
	testkit.MustOK(t, "credential", err)
	s := &committedWithTickets{whole: prefix + "-whole", appended: prefix + "-appended", wholeData: testkit.SeededBytes(2*bs, 1)}

	// The file to extend, committed by her client.
	v1 := testkit.SeededBytes(40000, 2)
	mallory := c.Client(client.Config{CredentialFile: malCred})
	testkit.WriteFile(t, mallory, s.appended, v1, 2)
	mallory.Close()

	conn := testkit.RawAs(t, c, malCred)
	addrs := datanodeAddrs(t, c)
	touched := map[string]bool{}

	// Transaction 1: two blocks written with their write tickets.
	cr := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCreate, Txn: 1, Flags: wire.FlagBegin, Path: s.whole, Type: wire.TypeFile, Mode: 0o644, Rep: 2})
	al := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpAllocate, Txn: 1, Ino: cr.Attr.Ino, Index: 0, Count: 2})
	var xs []wire.Extent
	for _, x := range al.Extents {
		x.CRC = make([]uint32, x.Count)
		for k := range x.CRC {
			i := int(x.Index) + k
			x.CRC[k] = testkit.BlockCRC(s.wholeData[i*bs:(i+1)*bs], bs)
		}
		for j, r := range x.Replicas {
			for k := 0; k < int(x.Count); k++ {
				i := int(x.Index) + k
				h := heldTicket{addr: addrs[r.Node], node: r.Node, block: r.Start + uint64(k), ticket: x.Tickets[j], write: true}
				data := s.wholeData[i*bs : (i+1)*bs]
				if resp := testkit.DataCall(t, h.addr, cred, &wire.DataReq{Op: wire.DataWrite, Block: h.block, Length: uint32(bs), CRC: x.CRC[k], Ticket: h.ticket}, data); resp.Status != wire.OK {
					t.Fatalf("write with her own ticket: %s", resp.Msg)
				}
				s.writes = append(s.writes, h)
				touched[h.addr] = true
			}
		}
		x.Tickets = nil
		xs = append(xs, x)
	}
	testkit.MustCall(t, conn, &wire.Request{Op: wire.OpSetBlocks, Txn: 1, Ino: cr.Attr.Ino, Extents: xs, Flags: wire.FlagSize, Size: int64(len(s.wholeData))})

	// Transaction 2: the other file extended in place with its append
	// tickets.
	fi := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpLookup, Txn: 2, Flags: wire.FlagBegin, Path: s.appended})
	g := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpExtend, Txn: 2, Ino: fi.Attr.Ino, Index: 0})
	if len(g.Extents) != 1 || len(g.Counters) != 1 {
		t.Fatalf("extend: %+v", g)
	}
	x := g.Extents[0]
	s.appendFrom = int(g.Counters[0])
	add := testkit.SeededBytes(3000, 3)
	s.appData = append(bytes.Clone(v1), add...)
	s.appBase = len(s.appData)
	crc := testkit.BlockCRC(s.appData, bs)
	for j, r := range x.Replicas {
		h := heldTicket{addr: addrs[r.Node], node: r.Node, block: r.Start, ticket: x.Tickets[j]}
		resp := testkit.DataCall(t, h.addr, cred, &wire.DataReq{Op: wire.DataExtend, Block: h.block, Length: uint32(len(add)), CRC: crc, Ticket: h.ticket, Offset: uint32(s.appendFrom), Base: testkit.BlockCRC(v1, bs)}, add)
		if resp.Status != wire.OK {
			t.Fatalf("extension with her own ticket: %s", resp.Msg)
		}
		s.appends = append(s.appends, h)
		touched[h.addr] = true
	}
	x.Tickets, x.CRC = nil, []uint32{crc}
	testkit.MustCall(t, conn, &wire.Request{Op: wire.OpSetBlocks, Txn: 2, Ino: fi.Attr.Ino, Extents: []wire.Extent{x}, Flags: wire.FlagSize, Size: int64(len(s.appData))})

	// Durable on the datanodes, then committed.
	for addr := range touched {
		if resp := testkit.DataCall(t, addr, cred, &wire.DataReq{Op: wire.DataSync}, nil); resp.Status != wire.OK {
			t.Fatalf("sync %s: %s", addr, resp.Msg)
		}
	}
	if freeze {
		for _, p := range c.DNs {
			c.Stop(p)
		}
	}
	testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCommit, Txn: 1})
	testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCommit, Txn: 2})
	if !freeze {
		admin := c.Client(client.Config{})
		defer admin.Close()
		for p, want := range map[string][]byte{s.whole: s.wholeData, s.appended: s.appData} {
			if got := testkit.ReadFile(t, admin, p); !bytes.Equal(got, want) {
				t.Fatalf("%s as committed reads differently", p)
			}
		}
	}
	return s
}

// replicasHold checks that every replica of path's blocks holds want's
// bytes, read with fresh read tickets (a file's partly filled last block
// up to its end, checked against its checksum by the datanode).
func replicasHold(t *testing.T, conn *rpc.Conn, cred *auth.Credential, path string, want []byte, bs int) {
	t.Helper()
	lr := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpLookup, Txn: 100, Flags: wire.FlagBegin, Path: path})
	br := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpBlocks, Txn: 100, Ino: lr.Attr.Ino})
	defer conn.Call(context.Background(), &wire.Request{Op: wire.OpAbort, Txn: 100})
	addr := map[uint32]string{}
	for _, n := range br.Nodes {
		addr[n.ID] = n.Addr
	}
	for _, x := range br.Extents {
		for j, r := range x.Replicas {
			for k := 0; k < int(x.Count); k++ {
				i := int(x.Index) + k
				block := padded(want[i*bs:min((i+1)*bs, len(want))], bs)
				n := min(bs, len(want)-i*bs)
				got, msg := readReplica(t, cred, addr[r.Node], &wire.DataReq{Op: wire.DataRead, Block: r.Start + uint64(k), Ticket: x.Tickets[j], Length: uint32(n), CRC: testkit.BlockCRC(block, bs)})
				if got == nil {
					t.Errorf("%s block %d on %s: %s", path, i, addr[r.Node], msg)
				} else if !bytes.Equal(padded(got, bs), block) {
					t.Errorf("%s block %d on %s differs from what was committed", path, i, addr[r.Node])
				}
			}
		}
	}
}

// readReplica sends one read request and returns the bytes answered, or
// nil and the refusal.
func readReplica(t *testing.T, cred *auth.Credential, addr string, q *wire.DataReq) ([]byte, string) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	testkit.MustOK(t, "dial", err)
	defer raw.Close()
	nc, err := auth.Client(raw, auth.Auth, cred)
	testkit.MustOK(t, "handshake", err)
	_, err = nc.Write(wire.FrameDataHeader(q))
	testkit.MustOK(t, "request", err)
	r := bufio.NewReader(nc)
	resp, err := wire.ReadDataResp(r)
	testkit.MustOK(t, "response", err)
	if resp.Status != wire.OK {
		return nil, resp.Msg
	}
	b := make([]byte, resp.Length)
	_, err = io.ReadFull(r, b)
	testkit.MustOK(t, "block", err)
	return b, ""
}

// openWrite is a transaction left open across a datanode restart, with
// the write tickets of its allocation.
type openWrite struct {
	conn *rpc.Conn
	path string
	ino  uint64
	x    wire.Extent
}

func beginOpenWrite(t *testing.T, c *clustertest.Procs, malCred, path string) *openWrite {
	t.Helper()
	conn := testkit.RawAs(t, c, malCred)
	cr := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCreate, Txn: 1, Flags: wire.FlagBegin, Path: path, Type: wire.TypeFile, Mode: 0o644, Rep: 2})
	al := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpAllocate, Txn: 1, Ino: cr.Attr.Ino, Index: 0, Count: 1})
	return &openWrite{conn: conn, path: path, ino: cr.Attr.Ino, x: al.Extents[0]}
}

// finish: the transaction, still open, finds the tickets it got before the
// restart refused; it asks for new ones, writes and commits.
func (o *openWrite) finish(t *testing.T, c *clustertest.Procs, cred *auth.Credential) {
	t.Helper()
	bs := int(c.Opts.Blocksize)
	data := testkit.SeededBytes(bs, 11)
	crc := testkit.BlockCRC(data, bs)
	addrs := datanodeAddrs(t, c)
	write := func(x wire.Extent) []*wire.DataResp {
		var out []*wire.DataResp
		for j, r := range x.Replicas {
			out = append(out, testkit.DataCall(t, addrs[r.Node], cred, &wire.DataReq{Op: wire.DataWrite, Block: r.Start, Length: uint32(bs), CRC: crc, Ticket: x.Tickets[j]}, data))
		}
		return out
	}
	for _, r := range write(o.x) {
		if r.Status == wire.OK || !strings.Contains(r.Msg, "older than the datanode's registration") {
			t.Errorf("a ticket from before the datanode's restart, its transaction still open: %v %q, want refused as older", r.Status, r.Msg)
		}
	}
	al := testkit.MustCall(t, o.conn, &wire.Request{Op: wire.OpAllocate, Txn: 1, Ino: o.ino, Index: 0, Count: 1})
	x := al.Extents[0]
	for _, r := range write(x) {
		if r.Status != wire.OK {
			t.Fatalf("a new ticket of the open transaction: %s", r.Msg)
		}
	}
	for _, r := range x.Replicas {
		if resp := testkit.DataCall(t, addrs[r.Node], cred, &wire.DataReq{Op: wire.DataSync}, nil); resp.Status != wire.OK {
			t.Fatalf("sync: %s", resp.Msg)
		}
	}
	x.Tickets, x.CRC = nil, []uint32{crc}
	testkit.MustCall(t, o.conn, &wire.Request{Op: wire.OpSetBlocks, Txn: 1, Ino: o.ino, Extents: []wire.Extent{x}, Flags: wire.FlagSize, Size: int64(bs)})
	testkit.MustCall(t, o.conn, &wire.Request{Op: wire.OpCommit, Txn: 1})
	replicasHold(t, o.conn, cred, o.path, data, bs)
}
