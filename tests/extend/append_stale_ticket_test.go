package extend

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/blockcrc"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestExtensionStaleAppendTicket: mallory, who may write a file, takes
// append tickets for its last block (OpExtend); her transaction then ends
// without her using them, in two ways: she aborts it, the datanodes learn
// the revocation (her ticket is refused) and then restart (they keep
// revocations in memory only, and the namenode sends each once); or the
// namenode restarts while it is open (its tickets are never revoked).
// Bob appends and commits: his bytes extend the block in place. Mallory,
// who can read the file, replays her old ticket with the checksum of
// bob's version as the base the datanode checks, and her own bytes at her
// ticket's offset, where bob's committed bytes are. The datanodes must
// refuse it, and bob's acknowledged append must read back.
//
// Failed (both ways) at b6d8f29: both datanodes accepted the replay;
// bob's committed bytes were overwritten on every replica and his version
// no longer read (checksum mismatch on every replica, fsck reported the
// block): acknowledged data of another user lost. The base check (the
// block's entry must hold the version the append extends) did not help,
// as the base is the requester's to choose, and append tickets keep the
// block's generation. Passes since 8e82265 (append tickets carry a
// sequence number; a datanode refuses one older than its registration or
// than the last extension it applied to the block).
func TestExtensionStaleAppendTicket(t *testing.T) {
	for _, mode := range []string{"datanodes restart", "namenode restarts"} {
		t.Run(strings.ReplaceAll(mode, " ", "-"), func(t *testing.T) { appStaleAppendTicket(t, mode) })
	}
}

func appStaleAppendTicket(t *testing.T, mode string) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	admin := c.Client(client.Config{})
	defer admin.Close()
	testkit.MustOK(t, "mkdir", admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Mkdir(ctx, "/m", 0o777)
		return err
	}))
	malCred := c.IssueCredential("mallory", auth.RoleUser)
	mallory := c.Client(client.Config{CredentialFile: malCred})
	defer mallory.Close()
	bob := c.Client(client.Config{CredentialFile: c.IssueCredential("bob", auth.RoleUser)})
	defer bob.Close()
	v1 := testkit.SeededBytes(40000, 1)
	testkit.MustOK(t, "create", mallory.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.CreateFile(ctx, "/m/f", client.CreateOptions{Rep: 2, Mode: 0o666})
		if err != nil {
			return err
		}
		_, err = f.Write(v1)
		return err
	}))
	fi, err := admin.Lookup(ctx, "/m/f")
	testkit.MustOK(t, "lookup", err)

	// Mallory's append tickets.
	conn := testkit.RawAs(t, c, malCred)
	g, err := conn.Call(ctx, &wire.Request{Op: wire.OpExtend, Txn: 1, Flags: wire.FlagBegin, Ino: fi.Ino, Index: 0})
	if err != nil || g.Code != wire.OK || len(g.Extents) != 1 || len(g.Counters) != 1 {
		t.Fatalf("extend: %v %+v", err, g)
	}
	x, from := g.Extents[0], int(g.Counters[0])
	addr := map[uint32]string{}
	for _, n := range g.Nodes {
		addr[n.ID] = n.Addr
	}
	cred, err := auth.LoadCredential(malCred)
	testkit.MustOK(t, "credential", err)
	replay := func(base []byte, data []byte) []*wire.DataResp {
		// The checksum the datanode computes: base's, with data placed at
		// from (blockcrc.Placed is affine).
		crc := testkit.BlockCRC(base, bs) ^ blockcrc.Placed(from, data, bs) ^ blockcrc.ZeroExtend(0, uint64(bs))
		var out []*wire.DataResp
		for j, r := range x.Replicas {
			out = append(out, testkit.DataCall(t, addr[r.Node], cred, &wire.DataReq{Op: wire.DataExtend, Block: r.Start, Length: uint32(len(data)),
				CRC: crc, Ticket: x.Tickets[j], Offset: uint32(from), Base: testkit.BlockCRC(base, bs)}, data))
		}
		return out
	}
	switch mode {
	case "datanodes restart":
		if _, err := conn.Call(ctx, &wire.Request{Op: wire.OpAbort, Txn: 1}); err != nil {
			t.Fatal(err)
		}
		// Wait until every datanode refuses her ticket: the revocation
		// arrived (an empty extension of the committed version changes
		// nothing).
		for revoked := false; !revoked; {
			revoked = true
			for _, r := range replay(v1, nil) {
				if r.Status == wire.OK {
					revoked = false
				} else if !strings.Contains(r.Msg, auth.ErrTicketRevoked.Error()) {
					t.Fatalf("an empty extension with her ticket: %s", r.Msg)
				}
			}
		}
		for _, p := range c.DNs {
			c.Kill(p)
			c.StartDatanode(p)
		}
		c.WaitLive(len(c.DNs))
	case "namenode restarts":
		c.Kill(c.NN)
		c.StartNamenode()
		c.WaitLive(len(c.DNs))
	}

	// Bob appends and commits (his client reconnects after a restart).
	before := blocksOf(t, admin, "/m/f")[0]
	add := testkit.SeededBytes(3000, 2)
	for attempt := 0; ; attempt++ {
		err := appAppend(ctx, bob, "/m/f", add)
		if err == nil {
			break
		}
		if attempt == 2 {
			t.Fatalf("bob appends: %v", err)
		}
	}
	v2 := append(bytes.Clone(v1), add...)
	if after := blocksOf(t, admin, "/m/f")[0]; after != before {
		t.Logf("bob's append was copied (%s → %s), not extended in place", before, after)
	}
	appCheck(t, "bob's append", "/m/f", v2, admin)

	// Mallory reads bob's version and replays her old ticket on it.
	seen, err := appRead(ctx, mallory, "/m/f")
	for attempt := 0; err != nil && attempt < 2; attempt++ {
		seen, err = appRead(ctx, mallory, "/m/f")
	}
	testkit.MustOK(t, "mallory reads", err)
	evil := bytes.Repeat([]byte{0xEE}, 1000)
	for j, r := range replay(seen, evil) {
		if r.Status == wire.OK {
			t.Errorf("%s: datanode %d accepted an extension with the append ticket of a transaction that ended before bob's commit", mode, j)
		}
	}
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	for i, cl := range []*client.Client{admin, tcp} {
		got, err := appRead(ctx, cl, "/m/f")
		if err != nil {
			t.Errorf("%s: client %d: bob's acknowledged version no longer reads: %v", mode, i, err)
		} else if !bytes.Equal(got, v2) {
			t.Errorf("%s: client %d: bob's acknowledged version reads wrongly: %s", mode, i, appDiff(got, v2))
		}
	}
	if p := fsckProblems(t, admin); len(p) > 0 {
		t.Errorf("fsck: %q", p)
	}
}
