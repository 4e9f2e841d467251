package ha

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// newGroupSecrets makes a CA, the members', datanodes' and a user's
// credentials and the ticket key in dir.
func newGroupSecrets(t *testing.T, dir string) *groupSecrets {
	t.Helper()
	s, err := auth.InitSecrets(dir, "plasma")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string, role auth.Role) string {
		c, err := s.Issue(name, role, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name+".pem")
		if err := os.WriteFile(p, c.PEM(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return &groupSecrets{namenode: issue("namenode", auth.RoleNamenode), datanode: issue("datanode", auth.RoleDatanode),
		user: issue("root", auth.RoleUser), ticketKey: filepath.Join(dir, "ticket.key")}
}

// heldTicket is a write ticket kept for a block.
type heldTicket struct {
	node   uint32
	block  uint64
	ticket []byte
}

// Issue 22 item 4: nothing a deposed leader granted writes over what a
// later leader committed. The group's database holds a boot epoch an hour
// ahead of the clock (the clocks went back), so every leader draws its
// block generations from the same epoch: generations and the datanode's
// registration floor cannot tell the leaders' tickets apart. A client
// holds write tickets of a transaction open on the first leader (40
// allocations, never committed); the leader is killed; the next leader
// hands the same blocks to a file it commits. Every held ticket is then
// refused by the datanode as of an older term, and the committed file
// reads back as written. Without the term check the old tickets' writes
// land on the committed blocks.
func TestDeposedLeaderTicketsWriteNothing(t *testing.T) {
	g := startGroupWith(t, 3, 1, groupOptions{Tickets: true, Prepare: epochAhead(t)})
	ctx := context.Background()
	cred, err := auth.LoadCredential(g.sec.user)
	testkit.MustOK(t, "credential", err)
	old := g.leader()
	dnAddr := g.datanodeAddr()

	// On the first leader: 40 allocations in one transaction, left open.
	conn, err := rpc.Dial(ctx, old.addr, auth.None, nil)
	testkit.MustOK(t, "dial the leader", err)
	defer conn.Close()
	cr := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCreate, Txn: 1, Flags: wire.FlagBegin, Path: "/by-the-old-leader", Type: wire.TypeFile, Mode: 0o644, Rep: 1})
	var held []heldTicket
	for i := range 40 {
		al := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpAllocate, Txn: 1, Ino: cr.Attr.Ino, Index: uint64(i), Count: 1})
		for _, x := range al.Extents {
			for j, r := range x.Replicas {
				held = append(held, heldTicket{node: r.Node, block: r.Start, ticket: x.Tickets[j]})
			}
		}
	}
	g.kill(old)
	l := g.leader()
	g.waitLive(1)

	// The next leader hands out most free blocks: the old leader's are
	// free here (its transaction never committed).
	cl := g.client()
	defer cl.Close()
	st, err := cl.FsStat(ctx)
	testkit.MustOK(t, "fsstat", err)
	bs := int(st.Blocksize)
	// Most of them: a user may hold at most seven eighths.
	data := testkit.SeededBytes(int(st.FreeBlocks)*3/4*bs, 22)
	testkit.WriteFile(t, cl, "/by-the-new-leader", data, 1)
	reused := map[uint64]bool{}
	lc, err := rpc.Dial(ctx, l.addr, auth.None, nil)
	testkit.MustOK(t, "dial the new leader", err)
	defer lc.Close()
	lr := testkit.MustCall(t, lc, &wire.Request{Op: wire.OpLookup, Txn: 1, Flags: wire.FlagBegin, Path: "/by-the-new-leader"})
	br := testkit.MustCall(t, lc, &wire.Request{Op: wire.OpBlocks, Txn: 1, Ino: lr.Attr.Ino})
	for _, x := range br.Extents {
		for _, r := range x.Replicas {
			for k := range uint64(x.Count) {
				reused[r.Start+k] = true
			}
		}
	}
	lc.Call(ctx, &wire.Request{Op: wire.OpAbort, Txn: 1})

	evil := bytes.Repeat([]byte("DEPOSED LEADER "), bs/15+1)[:bs]
	tried := 0
	for _, h := range held {
		if !reused[h.block] {
			continue
		}
		tried++
		r := testkit.DataCall(t, dnAddr, cred, &wire.DataReq{Op: wire.DataWrite, Block: h.block, Length: uint32(bs), CRC: testkit.BlockCRC(evil, bs), Ticket: h.ticket}, evil)
		if r.Status == wire.OK {
			t.Errorf("block %d, committed by the new leader: a write with the deposed leader's ticket was accepted", h.block)
		} else if !strings.Contains(r.Msg, "deposed") {
			t.Errorf("block %d: the deposed leader's ticket refused for another reason: %s", h.block, r.Msg)
		}
	}
	if tried == 0 {
		t.Fatalf("the new leader reused none of the %d blocks the old one allocated", len(held))
	}
	t.Logf("%d of the deposed leader's %d tickets were for blocks the new leader committed", tried, len(held))
	if got := testkit.ReadFile(t, cl, "/by-the-new-leader"); !bytes.Equal(got, data) {
		t.Fatalf("the file the new leader committed reads back differently (%d bytes)", len(got))
	}
	testkit.FsckClean(t, cl)
}

// datanodeAddr is the data address of the group's only datanode.
func (g *group) datanodeAddr() string {
	g.t.Helper()
	cl := g.client()
	defer cl.Close()
	dns, err := cl.Datanodes(context.Background())
	if err != nil || len(dns) != 1 {
		g.t.Fatalf("datanodes: %v %v", dns, err)
	}
	return dns[0].Addr
}

// epochAhead is a groupOptions.Prepare that sets the group's boot epoch an
// hour ahead of the clock, so that successive leaders draw the same epoch
// (as after the clocks went back) and only the Raft term orders their
// tickets.
func epochAhead(t *testing.T) func(db string) {
	return func(db string) {
		s, err := meta.OpenSQLiteWith(db, meta.SQLiteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.RaiseBootEpoch(uint64(time.Now().Add(time.Hour).Unix())); err != nil {
			t.Fatal(err)
		}
	}
}
