package ha

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Issue 22 item 4 and "nobody reads what is not theirs": a deposed
// leader's read ticket reads nothing its successor's clients wrote. As in
// TestDeposedLeaderTicketsWriteNothing the group's boot epoch is an hour
// ahead of the clock, so successive leaders draw overlapping generations.
// On the first leader a transaction allocates 40 times (its read tickets
// then carry a generation above what the next leader draws at first) and
// takes read tickets for two committed files. The leader is killed; the
// next leader deletes one file and hands its blocks to a new file it
// commits. Every held read ticket for such a block is refused, also
// after a restart of the datanode; the held tickets of the other file,
// untouched since, still read it. Without the datanode's per-block term
// the old tickets read the new file's bytes.
func TestDeposedLeaderReadsNothingRewritten(t *testing.T) {
	g := startGroupWith(t, 3, 1, groupOptions{Tickets: true, Prepare: epochAhead(t)})
	ctx := context.Background()
	cred, err := auth.LoadCredential(g.sec.user)
	testkit.MustOK(t, "credential", err)
	dnAddr := g.datanodeAddr()
	cl := g.client()
	defer cl.Close()
	st, err := cl.FsStat(ctx)
	testkit.MustOK(t, "fsstat", err)
	bs := int(st.Blocksize)
	oldData := testkit.SeededBytes(16*bs, 31)
	keptData := testkit.SeededBytes(4*bs, 32)
	testkit.WriteFile(t, cl, "/to-be-deleted", oldData, 1)
	testkit.WriteFile(t, cl, "/kept", keptData, 1)

	// On the first leader: 40 allocations, then read tickets for both
	// files, in one transaction left open.
	old := g.leader()
	conn, err := rpc.Dial(ctx, old.addr, auth.None, nil)
	testkit.MustOK(t, "dial the leader", err)
	defer conn.Close()
	cr := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCreate, Txn: 1, Flags: wire.FlagBegin, Path: "/scratch", Type: wire.TypeFile, Mode: 0o644, Rep: 1})
	for i := range 40 {
		testkit.MustCall(t, conn, &wire.Request{Op: wire.OpAllocate, Txn: 1, Ino: cr.Attr.Ino, Index: uint64(i), Count: 1})
	}
	oldTickets := readTickets(t, conn, 1, "/to-be-deleted")
	keptTickets := readTickets(t, conn, 1, "/kept")
	g.kill(old)
	l := g.leader()
	g.waitLive(1)

	// The next leader frees the first file's blocks and hands most free
	// blocks to a new file.
	cl.Close()
	cl = g.client()
	tx := cl.Begin()
	testkit.MustOK(t, "unlink", tx.Unlink(ctx, "/to-be-deleted"))
	testkit.MustOK(t, "commit the unlink", tx.Commit(ctx))
	st, err = cl.FsStat(ctx)
	testkit.MustOK(t, "fsstat", err)
	newData := testkit.SeededBytes(int(st.FreeBlocks)*3/4*bs, 33)
	testkit.WriteFile(t, cl, "/by-the-new-leader", newData, 1)
	lc, err := rpc.Dial(ctx, l.addr, auth.None, nil)
	testkit.MustOK(t, "dial the new leader", err)
	defer lc.Close()
	// Datanode block -> the new file's bytes there.
	rewritten := map[uint64][]byte{}
	for b, off := range blockOffsets(t, lc, 1, "/by-the-new-leader", bs) {
		rewritten[b] = newData[off:min(off+bs, len(newData))]
	}
	lc.Call(ctx, &wire.Request{Op: wire.OpAbort, Txn: 1})

	tried := 0
	for b, tk := range oldTickets {
		want, ok := rewritten[b]
		if !ok {
			continue
		}
		tried++
		resp, got := dataRead(t, dnAddr, cred, b, tk)
		switch {
		case resp.Status == wire.OK && bytes.Equal(got, want[:min(len(want), len(got))]):
			t.Errorf("block %d: the deposed leader's read ticket read the new leader's file (%d bytes)", b, len(got))
		case resp.Status == wire.OK:
			t.Errorf("block %d, rewritten by the new leader: the deposed leader's read ticket read %d bytes", b, len(got))
		case resp.Status != wire.ErrCodePerm:
			t.Errorf("block %d: refused with status %v, not as a stale ticket: %s", b, resp.Status, resp.Msg)
		}
	}
	if tried == 0 {
		t.Fatalf("the new leader reused none of the %d blocks of the deleted file", len(oldTickets))
	}
	t.Logf("%d of the deleted file's %d blocks were rewritten by the new leader", tried, len(oldTickets))

	// The old leader's tickets still read what did not change.
	kept := map[uint64]int{}
	for b, off := range blockOffsets(t, lc, 2, "/kept", bs) {
		kept[b] = off
	}
	for b, tk := range keptTickets {
		resp, got := dataRead(t, dnAddr, cred, b, tk)
		if resp.Status != wire.OK {
			t.Fatalf("block %d of /kept, untouched since: the deposed leader's read ticket refused: %s", b, resp.Msg)
		}
		off := kept[b]
		if want := keptData[off : off+bs]; !bytes.Equal(append(got, make([]byte, bs-len(got))...), want) {
			t.Fatalf("block %d of /kept reads differently with the deposed leader's ticket", b)
		}
	}

	// A restarted datanode has forgotten which blocks were rewritten under
	// which term: it counts them all as of the term it registers with, so
	// the old tickets still read nothing rewritten.
	g.restartDatanode(g.dns[0], dnAddr)
	for b, tk := range oldTickets {
		if _, ok := rewritten[b]; !ok {
			continue
		}
		if resp, got := dataRead(t, dnAddr, cred, b, tk); resp.Status == wire.OK {
			t.Errorf("block %d, rewritten by the new leader: after a restart of the datanode the deposed leader's read ticket read %d bytes", b, len(got))
		}
	}
	if got := testkit.ReadFile(t, cl, "/by-the-new-leader"); !bytes.Equal(got, newData) {
		t.Fatalf("the file the new leader committed reads back differently (%d bytes)", len(got))
	}
	testkit.FsckClean(t, cl)
}

// restartDatanode kills the datanode p (kill -9), starts it again and
// waits until it serves at addr (it serves once registered).
func (g *group) restartDatanode(p *proc, addr string) {
	g.t.Helper()
	args := p.cmd.Args[1:]
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	g.start(p, args...)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("the restarted datanode does not serve at %s after 60s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// readTickets returns the read ticket of each datanode block of path (one
// replica), as transaction txn on conn (begun already) sees it.
func readTickets(t *testing.T, conn *rpc.Conn, txn uint64, path string) map[uint64][]byte {
	t.Helper()
	lr := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpLookup, Txn: txn, Path: path})
	br := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpBlocks, Txn: txn, Ino: lr.Attr.Ino})
	out := map[uint64][]byte{}
	for _, x := range br.Extents {
		for k := range uint64(x.Count) {
			out[x.Replicas[0].Start+k] = x.Tickets[0]
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no blocks", path)
	}
	return out
}

// blockOffsets maps each datanode block of path (one replica) to its
// offset in the file, in a new transaction txn on conn.
func blockOffsets(t *testing.T, conn *rpc.Conn, txn uint64, path string, bs int) map[uint64]int {
	t.Helper()
	lr := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpLookup, Txn: txn, Flags: wire.FlagBegin, Path: path})
	br := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpBlocks, Txn: txn, Ino: lr.Attr.Ino})
	out := map[uint64]int{}
	for _, x := range br.Extents {
		for k := range uint64(x.Count) {
			out[x.Replicas[0].Start+k] = int(x.Index+k) * bs
		}
	}
	return out
}

// dataRead reads block of the datanode at addr with a ticket and returns
// the answer and the bytes read (nil if refused).
func dataRead(t *testing.T, addr string, cred *auth.Credential, block uint64, ticket []byte) (*wire.DataResp, []byte) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	testkit.MustOK(t, "dial the datanode", err)
	defer raw.Close()
	nc, err := auth.Client(raw, auth.Auth, cred)
	testkit.MustOK(t, "datanode handshake", err)
	if _, err := nc.Write(wire.FrameDataHeader(&wire.DataReq{Op: wire.DataRead, Block: block, Ticket: ticket})); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(nc)
	resp, err := wire.ReadDataResp(r)
	testkit.MustOK(t, "read the datanode's answer", err)
	if resp.Status != wire.OK {
		return resp, nil
	}
	b := make([]byte, resp.Length)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatal(err)
	}
	return resp, b
}
