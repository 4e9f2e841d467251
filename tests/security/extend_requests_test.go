package security

import (
	"bytes"
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// appendTicket seals an append ticket for block from offset from, with a
// sequence number past every one the namenode issued.
func (r *rawDN) appendTicket(block, gen, from uint64) []byte {
	return r.appendTicketSeq(block, gen, from, 1<<63-1)
}

func (r *rawDN) appendTicketSeq(block, gen, from, seq uint64) []byte {
	return (&auth.Ticket{Tag: 1<<60 + block, Node: r.node, Start: block, Count: 1, Append: true, From: from,
		Expiry: time.Now().Add(time.Hour).Unix(), Gen: gen, Seq: seq}).Seal(r.c.Secrets.TicketKey)
}

func (r *rawDN) extend(block uint64, ticket []byte, off int, data []byte, base, crc uint32) *wire.DataResp {
	return testkit.DataCall(r.t, r.dn.Addr, r.cred, &wire.DataReq{Op: wire.DataExtend, Block: block, Length: uint32(len(data)), CRC: crc, Ticket: ticket, Offset: uint32(off), Base: base}, data)
}

// TestHostileExtend: a holder of an append ticket can write into the block
// only past the committed length the ticket names, cannot read or rewrite
// the block with it, and cannot extend a block another allocation wrote;
// a write ticket does not extend. The committed bytes read back unchanged
// after every refusal.
func TestHostileExtend(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	r := newRawDN(t, c, c.DNs[0])
	const block, gen = 3, 1 << 40
	v1 := testkit.SeededBytes(40000, 1)
	if resp := r.write(block, gen, uint32(len(v1)), v1, testkit.BlockCRC(v1, r.bs)); resp.Status != wire.OK {
		t.Fatalf("write: %s", resp.Msg)
	}
	base := testkit.BlockCRC(v1, r.bs)
	tk := r.appendTicket(block, gen, uint64(len(v1)))
	refused := func(what string, resp *wire.DataResp, word string) {
		t.Helper()
		if resp.Status == wire.OK {
			t.Errorf("%s: accepted", what)
		} else if !strings.Contains(resp.Msg, word) {
			t.Errorf("%s: refused with %q, want it to say %q", what, resp.Msg, word)
		}
		if got, msg := r.read(block, gen); !bytes.Equal(got, padded(v1, r.bs)) {
			t.Fatalf("after %s the committed block reads differently (%s)", what, msg)
		}
	}
	// Overwrite the committed bytes from offset 100.
	evil := bytes.Repeat([]byte{0xEE}, 500)
	over := bytes.Clone(v1)
	copy(over[100:], evil)
	refused("an extension before the committed length", r.extend(block, tk, 100, evil, base, testkit.BlockCRC(over, r.bs)), "committed length")
	// The append ticket as a write or read ticket.
	refused("a write with an append ticket", testkit.DataCall(t, r.dn.Addr, r.cred, &wire.DataReq{Op: wire.DataWrite, Block: block, Length: uint32(len(evil)), CRC: testkit.BlockCRC(evil, r.bs), Ticket: tk}, evil), "ticket")
	resp, b := dataRead(t, r.cred, heldTicket{addr: r.dn.Addr, node: r.node, block: block, ticket: tk})
	if resp.Status == wire.OK || b != nil {
		t.Error("a read with an append ticket was answered")
	}
	// A write ticket does not extend; nor does an append ticket of another
	// generation (a block since reallocated, or never this allocation's).
	add := testkit.SeededBytes(64, 2)
	v2 := append(bytes.Clone(v1), add...)
	refused("an extension with a write ticket", r.extend(block, r.ticket(block, true, gen), len(v1), add, base, testkit.BlockCRC(v2, r.bs)), "append")
	refused("an extension with an older generation", r.extend(block, r.appendTicket(block, gen-1, uint64(len(v1))), len(v1), add, base, testkit.BlockCRC(v2, r.bs)), "generation")
	refused("an extension with a newer generation", r.extend(block, r.appendTicket(block, gen+1, uint64(len(v1))), len(v1), add, base, testkit.BlockCRC(v2, r.bs)), "generation")
	// A checksum that does not match the data, or a base of another version.
	refused("an extension with a wrong checksum", r.extend(block, tk, len(v1), add, base, testkit.BlockCRC(v2, r.bs)^1), "checksum")
	refused("an extension of another version", r.extend(block, tk, len(v1), add, base^1, testkit.BlockCRC(v2, r.bs)^1), "checksum")
	// A ticket granted before the datanode registered (sequence number
	// below the namenode's generation then).
	refused("an extension with a ticket older than the registration", r.extend(block, r.appendTicketSeq(block, gen, uint64(len(v1)), 1), len(v1), add, base, testkit.BlockCRC(v2, r.bs)), "older")
	// Past the block's end.
	refused("an extension past the block's end", r.extend(block, r.appendTicket(block, gen, uint64(r.bs-10)), r.bs-10, add, base, 0), "block")
	// The honest extension still works, and reads back.
	if resp := r.extend(block, tk, len(v1), add, base, testkit.BlockCRC(v2, r.bs)); resp.Status != wire.OK {
		t.Fatalf("extension: %s", resp.Msg)
	}
	if got, msg := r.read(block, gen); !bytes.Equal(got, padded(v2, r.bs)) {
		t.Fatalf("the extended block reads differently (%s)", msg)
	}
}

// TestHostileExtendRequests: the namenode hands out append tickets only to
// a writer of the file, only for its committed, partly filled last block,
// and an extended block is attached only where it was granted.
func TestHostileExtendRequests(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	credFile := c.IssueCredential("mallory", auth.RoleUser)
	mallory := c.Client(client.Config{CredentialFile: credFile})
	defer mallory.Close()
	admin := c.Client(client.Config{})
	defer admin.Close()
	ctx := context.Background()
	testkit.MustOK(t, "mkdir", admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Mkdir(ctx, "/m", 0o777)
		return err
	}))
	bs := int(c.Opts.Blocksize)
	testkit.WriteRep2(t, admin, "/m/theirs", testkit.SeededBytes(40000, 1))
	testkit.WriteRep2(t, mallory, "/m/a", testkit.SeededBytes(bs+40000, 2)) // block 1 partly filled
	testkit.WriteRep2(t, mallory, "/m/b", testkit.SeededBytes(40000, 3))
	testkit.WriteRep2(t, mallory, "/m/full", testkit.SeededBytes(bs, 4))
	ino := func(p string) uint64 {
		fi, err := admin.Lookup(ctx, p)
		testkit.MustOK(t, "lookup", err)
		return fi.Ino
	}
	conn := testkit.RawAs(t, c, credFile)
	txn := uint64(1)
	call := func(q *wire.Request) *wire.Response {
		t.Helper()
		q.Txn = txn
		q.Flags |= wire.FlagBegin
		r, err := conn.Call(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	next := func() {
		conn.Call(ctx, &wire.Request{Op: wire.OpAbort, Txn: txn})
		txn++
	}
	for _, tc := range []struct {
		what  string
		ino   uint64
		index uint64
		want  wire.Code
	}{
		{"a file of another user's, read-only to her", ino("/m/theirs"), 0, wire.ErrCodePerm},
		{"a block that is not the last", ino("/m/a"), 0, wire.ErrCodeInvalid},
		{"a block past the end", ino("/m/a"), 2, wire.ErrCodeInvalid},
		{"a full last block", ino("/m/full"), 0, wire.ErrCodeInvalid},
	} {
		if r := call(&wire.Request{Op: wire.OpExtend, Ino: tc.ino, Index: tc.index}); r.Code != tc.want {
			t.Errorf("extend of %s: %v %q, want code %v", tc.what, r.Code, r.Msg, tc.want)
		}
		next()
	}
	// Granted for /m/a block 1: attached to /m/b, or as another index, it
	// is refused; attached where granted, it is accepted.
	g := call(&wire.Request{Op: wire.OpExtend, Ino: ino("/m/a"), Index: 1})
	if g.Code != wire.OK || len(g.Extents) != 1 || len(g.Counters) != 1 || g.Counters[0] != 40000 {
		t.Fatalf("extend of /m/a block 1: %v %q %+v", g.Code, g.Msg, g.Counters)
	}
	x := g.Extents[0]
	x.Tickets = nil
	attach := func(ino, index uint64, size int64) wire.Code {
		y := x
		y.Index = index
		return call(&wire.Request{Op: wire.OpSetBlocks, Ino: ino, Extents: []wire.Extent{y}, Flags: wire.FlagSize, Size: size}).Code
	}
	if code := attach(ino("/m/b"), 0, 40100); code != wire.ErrCodeInvalid {
		t.Errorf("extended block of /m/a attached to /m/b: %v, want refused", code)
	}
	if code := attach(ino("/m/a"), 0, int64(bs)+40100); code != wire.ErrCodeInvalid {
		t.Errorf("extended block 1 attached as block 0: %v, want refused", code)
	}
	if code := attach(ino("/m/a"), 1, int64(bs)+40000); code != wire.OK {
		t.Errorf("extended block attached where granted: %v", code)
	}
	// Written in this transaction now: no second grant.
	if r := call(&wire.Request{Op: wire.OpExtend, Ino: ino("/m/a"), Index: 1}); r.Code != wire.ErrCodeInvalid {
		t.Errorf("second extend in one transaction: %v %q, want refused", r.Code, r.Msg)
	}
	next()
	testkit.FsckClean(t, admin)
}

// TestHostileOldReadTicketAfterAppend: a reader's ticket for a file's
// partly filled last block reads that block's bytes of the version it was
// issued for, not what was appended after (the owner may have made the
// file unreadable to it first): a whole-block read with it is refused.
func TestHostileOldReadTicketAfterAppend(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	admin := c.Client(client.Config{})
	defer admin.Close()
	ctx := context.Background()
	data := testkit.SeededBytes(30000, 1)
	testkit.WriteRep2(t, admin, "/f", data)
	fi, err := admin.Lookup(ctx, "/f")
	testkit.MustOK(t, "lookup", err)
	// Bob opens the file (mode 0644) in a transaction he keeps open.
	cred := c.IssueCredential("bob", auth.RoleUser)
	conn := testkit.RawAs(t, c, cred)
	r := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpBlocks, Txn: 1, Flags: wire.FlagBegin, Ino: fi.Ino})
	if len(r.Extents) == 0 || len(r.Extents[0].Tickets) == 0 {
		t.Fatalf("no block list: %+v", r)
	}
	x := r.Extents[0]
	addrs := datanodeAddrs(t, c)
	addr := addrs[x.Replicas[0].Node]
	bobCred, err := auth.LoadCredential(cred)
	testkit.MustOK(t, "credential", err)
	// The owner makes it private and appends a secret.
	mode := fs.FileMode(0o600)
	_, err = clientx.Auto(admin, clientx.Durable).SetAttr(ctx, fi.Ino, client.SetAttr{Mode: &mode})
	testkit.MustOK(t, "chmod", err)
	testkit.AppendTo(t, admin, "/f", []byte("the secret"), false)
	whole := testkit.DataCall(t, addr, bobCred, &wire.DataReq{Op: wire.DataRead, Block: x.Replicas[0].Start, Ticket: x.Tickets[0]}, nil)
	if whole.Status == wire.OK {
		t.Fatalf("a whole-block read with a ticket of the version before the append was answered (%d bytes)", whole.Length)
	}
	prefix := testkit.DataCall(t, addr, bobCred, &wire.DataReq{Op: wire.DataRead, Block: x.Replicas[0].Start, Ticket: x.Tickets[0], Length: uint32(len(data)), CRC: testkit.BlockCRC(data, int(c.Opts.Blocksize))}, nil)
	if prefix.Status != wire.OK || prefix.Length != uint32(len(data)) {
		t.Fatalf("the version the ticket was issued for: %v %q, %d bytes", prefix.Status, prefix.Msg, prefix.Length)
	}
	longer := testkit.DataCall(t, addr, bobCred, &wire.DataReq{Op: wire.DataRead, Block: x.Replicas[0].Start, Ticket: x.Tickets[0], Length: uint32(len(data) + 10), CRC: 0}, nil)
	if longer.Status == wire.OK {
		t.Fatal("a read of more than the ticket's version was answered")
	}
}
