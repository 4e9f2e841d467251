package security

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Block generations (issue 8 item 2): a ticket is never honoured for a
// block that was freed and reallocated after it was issued, whatever
// restarts happened in between (revocations live in memory only).

// heldTicket is a ticket for one block of one datanode, kept by a client.
type heldTicket struct {
	addr   string
	node   uint32
	block  uint64
	ticket []byte
	write  bool
}

// dataRead reads one block with a ticket on a new connection and returns
// the response and the block's bytes (nil if refused).
func dataRead(t *testing.T, cred *auth.Credential, h heldTicket) (*wire.DataResp, []byte) {
	t.Helper()
	raw, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	nc, err := auth.Client(raw, auth.Auth, cred)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(wire.FrameDataHeader(&wire.DataReq{Op: wire.DataRead, Block: h.block, Ticket: h.ticket})); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(nc)
	resp, err := wire.ReadDataResp(r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != wire.OK {
		return resp, nil
	}
	b := make([]byte, resp.Length)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// ticketsOf returns one held ticket per block of extents xs (with their
// tickets) on datanodes whose addresses addr gives.
func ticketsOf(xs []wire.Extent, addr map[uint32]string, write bool) []heldTicket {
	var out []heldTicket
	for _, x := range xs {
		for j, r := range x.Replicas {
			if j >= len(x.Tickets) {
				continue
			}
			for k := uint64(0); k < uint64(x.Count); k++ {
				out = append(out, heldTicket{addr: addr[r.Node], node: r.Node, block: r.Start + k, ticket: x.Tickets[j], write: write})
			}
		}
	}
	return out
}

type blockKey struct {
	node  uint32
	block uint64
}

// staleSetup is the cluster state of the stale-ticket scenarios: mallory,
// an ordinary user, holds read tickets of her file /m/old (deleted since)
// and write tickets of blocks allocated in a transaction that never
// commits; alice owns /alice (0700).
type staleSetup struct {
	c       *clustertest.Procs
	mallory *auth.Credential
	held    []heldTicket
	// Aborting mallory's transactions (on her raw connection), for the
	// scenarios in which the namenode keeps running.
	abort func()
}

func datanodeAddrs(t *testing.T, c *clustertest.Procs) map[uint32]string {
	t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	dns, err := cl.Datanodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[uint32]string{}
	for _, d := range dns {
		m[d.ID] = d.Addr
	}
	return m
}

func setupStale(t *testing.T, c *clustertest.Procs, rep int) *staleSetup {
	t.Helper()
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	c.MustRun("mkdir", "/m")
	c.MustRun("chmod", "777", "/m")
	c.MustRun("mkdir", "/alice")
	c.MustRun("chown", "alice:alice", "/alice")
	c.MustRun("chmod", "700", "/alice")
	mcredFile := c.IssueCredential("mallory", auth.RoleUser)
	mcred, err := auth.LoadCredential(mcredFile)
	if err != nil {
		t.Fatal(err)
	}
	mcl := c.Client(client.Config{CredentialFile: mcredFile})
	old := bytes.Repeat([]byte("mallory's old file "), 4*bs/19+1)[:4*bs]
	testkit.WriteFile(t, mcl, "/m/old", old, rep)
	addrs := datanodeAddrs(t, c)
	s := &staleSetup{c: c, mallory: mcred}

	// Transaction 1 reads /m/old: read tickets.
	conn := testkit.RawAs(t, c, mcredFile)
	lr := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpLookup, Txn: 1, Flags: wire.FlagBegin, Path: "/m/old"})
	br := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpBlocks, Txn: 1, Ino: lr.Attr.Ino})
	reads := ticketsOf(br.Extents, addrs, false)
	if len(reads) == 0 {
		t.Fatalf("no read tickets for /m/old: %+v", br)
	}
	for _, h := range reads {
		if r, b := dataRead(t, mcred, h); r.Status != wire.OK || !bytes.Contains(b, []byte("mallory's old file")) {
			t.Fatalf("mallory's read ticket refused for her own file: %+v", r)
		}
	}
	// Transaction 2 allocates blocks and writes them, and never commits.
	cr := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpCreate, Txn: 2, Flags: wire.FlagBegin, Path: "/m/new", Type: wire.TypeFile, Mode: 0o644, Rep: uint8(rep)})
	al := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpAllocate, Txn: 2, Ino: cr.Attr.Ino, Index: 0, Count: 4})
	writes := ticketsOf(al.Extents, addrs, true)
	if len(writes) == 0 {
		t.Fatalf("no write tickets: %+v", al)
	}
	for _, h := range writes {
		if r := malloryWrite(t, mcred, h, bs); r.Status != wire.OK {
			t.Fatalf("mallory's write ticket refused for her own allocation: %s", r.Msg)
		}
	}
	s.held = append(reads, writes...)
	// /m/old is deleted; its blocks are free once transaction 1 ends.
	if err := mcl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, "/m/old") }); err != nil {
		t.Fatal(err)
	}
	mcl.Close()
	s.abort = func() {
		for _, id := range []uint64{1, 2} {
			if r, err := conn.Call(ctx, &wire.Request{Op: wire.OpAbort, Txn: id}); err != nil || r.Code != wire.OK {
				t.Fatalf("abort %d: %v %+v", id, err, r)
			}
		}
	}
	return s
}

// malloryPayload is what mallory writes with her write tickets.
func malloryPayload(bs int) []byte {
	return bytes.Repeat([]byte("MALLORY WAS HERE "), bs/17+1)[:bs]
}

func malloryWrite(t *testing.T, cred *auth.Credential, h heldTicket, bs int) *wire.DataResp {
	t.Helper()
	data := malloryPayload(bs)
	return testkit.DataCall(t, h.addr, cred, &wire.DataReq{Op: wire.DataWrite, Block: h.block, Length: uint32(bs), CRC: checksum(data), Ticket: h.ticket}, data)
}

// victim: alice writes a 0600 file that reuses the freed blocks and
// mallory's old tickets must neither read nor overwrite it.
func (s *staleSetup) victim(t *testing.T, cfg client.Config, rep int) {
	t.Helper()
	c := s.c
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	cfg.CredentialFile = c.IssueCredential("alice", auth.RoleUser)
	acl := c.Client(cfg)
	defer acl.Close()
	secret := testkit.RandomBytes(t, 8*bs) // as many blocks as mallory held
	if _, err := acl.CopyIn(ctx, bytes.NewReader(secret), "/alice/secret", client.CopyOptions{Rep: rep, Mode: 0o600}); err != nil {
		t.Fatalf("alice's write: %v", err)
	}
	// Where alice's blocks are.
	admin := c.Client(client.Config{})
	defer admin.Close()
	fi, err := admin.Lookup(ctx, "/alice/secret")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode.Perm() != 0o600 {
		t.Fatalf("alice's file has mode %v", fi.Mode)
	}
	tx := admin.Begin()
	xs, err := tx.Blocks(ctx, fi.Ino)
	tx.Abort(ctx)
	if err != nil {
		t.Fatal(err)
	}
	addrs := datanodeAddrs(t, c)
	idOf := map[string]uint32{}
	for id, a := range addrs {
		idOf[a] = id
	}
	content := map[blockKey][]byte{} // alice's blocks → their content
	for _, x := range xs {
		for _, r := range x.Replicas {
			for k := 0; k < x.Count; k++ {
				i := int(x.Index) + k
				content[blockKey{idOf[r.Addr], r.Start + uint64(k)}] = secret[i*bs : (i+1)*bs]
			}
		}
	}
	reused := 0
	for _, h := range s.held {
		want, ok := content[blockKey{h.node, h.block}]
		if !ok {
			continue
		}
		reused++
		// Reads, with read tickets and with write tickets (which do not
		// allow reading at all).
		r, b := dataRead(t, s.mallory, h)
		if r.Status == wire.OK {
			leak := "other data"
			if bytes.Equal(b, want) {
				leak = "alice's data"
			}
			t.Errorf("mallory's old %s ticket read block %d of datanode %d, now alice's (0600): got %s", kind(h), h.block, h.node, leak)
		} else if !strings.Contains(r.Msg, "older than the") && !(h.write && strings.Contains(r.Msg, "does not allow reading")) {
			t.Errorf("old %s ticket refused for the wrong reason: %s", kind(h), r.Msg)
		}
		if h.write {
			if r := malloryWrite(t, s.mallory, h, bs); r.Status == wire.OK {
				t.Errorf("mallory's old write ticket overwrote block %d of datanode %d, now alice's", h.block, h.node)
			} else if !strings.Contains(r.Msg, "older than the") { // the block, or the datanode's registration
				t.Errorf("old write ticket refused for the wrong reason: %s", r.Msg)
			}
		}
	}
	if reused == 0 {
		t.Fatalf("alice's file reuses none of the blocks mallory holds tickets for (the test's premise)")
	}
	// Alice's file is intact, read both ways.
	for _, noSC := range []bool{false, true} {
		cfg.NoShortCircuit = noSC
		acl2 := c.Client(cfg)
		got := testkit.ReadFile(t, acl2, "/alice/secret")
		acl2.Close()
		if !bytes.Equal(got, secret) {
			t.Fatalf("alice's file changed (no short-circuit %v)", noSC)
		}
	}
	if out := c.MustRun("fsck"); !strings.Contains(out, " 0 problems") {
		t.Fatal(out)
	}
}

func kind(h heldTicket) string {
	if h.write {
		return "write"
	}
	return "read"
}

// TestStaleTicketAfterNamenodeRestart: mallory holds read and write
// tickets of open transactions when the namenode is killed; after the
// restart her blocks are free and reused by alice's 0600 file, and the
// old tickets (never revoked: revocations are in memory) neither read nor
// overwrite it. Alice writes over TCP.
func TestStaleTicketAfterNamenodeRestart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	s := setupStale(t, c, 1)
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(1)
	s.victim(t, client.Config{NoShortCircuit: true}, 1)
}

// TestStaleTicketAfterDatanodeRestart: mallory's transactions end and the
// datanode learns their revocation, then restarts and forgets it; the
// blocks are reused by alice's 0600 file (written short-circuit), and the
// old tickets neither read nor overwrite it.
func TestStaleTicketAfterDatanodeRestart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, Size: 40 << 16})
	s := setupStale(t, c, 1)
	s.abort()
	// The allocator goes on from where it stopped (next fit): fill the
	// rest of the volume so that alice's file wraps around to the blocks
	// mallory held.
	filler := c.Client(client.Config{})
	testkit.WriteFile(t, filler, "/filler", make([]byte, int(c.Opts.Size)-8*int(c.Opts.Blocksize)), 1)
	filler.Close()
	// Wait for the revocation to reach the datanode.
	probe := s.held[0]
	for i := 0; ; i++ {
		r, _ := dataRead(t, s.mallory, probe)
		if r.Status != wire.OK && strings.Contains(r.Msg, "ended") {
			break
		}
		if i > 3000 {
			t.Fatal("revocation not delivered after 30s")
		}
		time.Sleep(10 * time.Millisecond) // polling for the heartbeat
	}
	dn := c.DNs[0]
	c.Kill(dn)
	c.WaitLive(0)
	c.StartDatanode(dn)
	c.WaitLive(1)
	s.victim(t, client.Config{}, 1)
}

// toLegacyLayout rewrites the volume in dir (its datanode stopped) as
// datanodes from before generations and the inline layout left them: the
// blocks' checksums in a file crc beside a data file of blocks only, no
// generations, no layout in the config.
func toLegacyLayout(t *testing.T, dir string) {
	t.Helper()
	cfgPath := filepath.Join(dir, "config")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	blocks, bs := int64(cfg["blocks"].(float64)), int64(cfg["blocksize"].(float64))
	data := filepath.Join(dir, "data")
	entries := make([]byte, 16*blocks)
	f, err := os.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(entries, blocks*bs)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	crcs := make([]byte, 4*blocks)
	for i := int64(0); i < blocks; i++ {
		if binary.LittleEndian.Uint64(entries[16*i+8:]) != 0 {
			t.Fatalf("%s: block %d has a generation: not a volume written without tickets", dir, i)
		}
		copy(crcs[4*i:], entries[16*i:16*i+4])
	}
	delete(cfg, "layout")
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "crc"), crcs, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(data, blocks*bs); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTicketGenerationsOrdinaryIO: ordinary reads and writes keep working
// with generations: volumes from before them (a crc file, no generations;
// blocks written without them) are read, converted, and take new writes;
// short-circuit (local) writes and replication chains record generations
// like TCP writes do, so mallory's stale tickets are refused on every
// replica of alice's rep-2 file written short-circuit.
func TestTicketGenerationsOrdinaryIO(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, DataSecurity: "none"})
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	// Files written on volumes without generations (no tickets at level
	// none), which then lose their gen files: volumes as older datanodes
	// left them.
	legacy := map[string][]byte{"/legacy1": testkit.RandomBytes(t, 3*bs+17), "/legacy2": testkit.RandomBytes(t, 5*bs)}
	cl := c.Client(client.Config{})
	testkit.WriteFile(t, cl, "/legacy1", legacy["/legacy1"], 1)
	testkit.WriteFile(t, cl, "/legacy2", legacy["/legacy2"], 2)
	cl.Close()
	for _, dn := range c.DNs {
		c.Kill(dn)
		toLegacyLayout(t, dn.Dir)
	}
	c.WaitLive(0)
	c.Opts.DataSecurity = "auth"
	for _, dn := range c.DNs {
		c.StartDatanode(dn)
	}
	c.WaitLive(2)
	check := func(what string, files map[string][]byte) {
		t.Helper()
		for _, noSC := range []bool{false, true} {
			cl := c.Client(client.Config{NoShortCircuit: noSC})
			for p, want := range files {
				if got := testkit.ReadFile(t, cl, p); !bytes.Equal(got, want) {
					t.Fatalf("%s: %s differs (no short-circuit %v)", what, p, noSC)
				}
			}
			cl.Close()
		}
		if out := c.MustRun("fsck"); !strings.Contains(out, " 0 problems") {
			t.Fatalf("%s: %s", what, out)
		}
	}
	check("files from before generations", legacy)
	for _, dn := range c.DNs {
		blocks := c.Opts.Size / c.Opts.Blocksize
		st, err := os.Stat(filepath.Join(dn.Dir, "data"))
		if err != nil {
			t.Fatal(err)
		}
		if want := blocks*c.Opts.Blocksize + 16*blocks; st.Size() != want {
			t.Errorf("volume without generations not converted: data file of %d bytes, want %d (blocks and their entries)", st.Size(), want)
		}
		if _, err := os.Stat(filepath.Join(dn.Dir, "crc")); !os.IsNotExist(err) {
			t.Errorf("crc file still there after the conversion: %v", err)
		}
	}

	// The stale-ticket scenario with alice writing rep 2 short-circuit:
	// the first replica is adopted (DataAdopt), the second forwarded.
	s := setupStale(t, c, 2)
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(2)
	s.victim(t, client.Config{}, 2)

	// Overwrites (new blocks, old ones freed and reused) by every path.
	files := map[string][]byte{}
	for k, v := range legacy {
		files[k] = v
	}
	for round := 0; round < 3; round++ {
		for _, noSC := range []bool{false, true} {
			for _, rep := range []int{1, 2} {
				cl := c.Client(client.Config{NoShortCircuit: noSC})
				p := fmt.Sprintf("/f-%v-%d", noSC, rep)
				if round > 0 {
					if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, p) }); err != nil {
						t.Fatal(err)
					}
				}
				data := testkit.RandomBytes(t, (3+round)*bs+round*100)
				testkit.WriteFile(t, cl, p, data, rep)
				files[p] = data
				// Replace a legacy file (its blocks are freed and
				// reused), and change part of the other in place
				// (copy-on-write of the blocks touched).
				lp := "/legacy" + fmt.Sprint(1+round%2)
				if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, lp) }); err != nil {
					t.Fatal(err)
				}
				data = testkit.RandomBytes(t, (2+round)*bs+7)
				testkit.WriteFile(t, cl, lp, data, rep)
				files[lp] = data
				op := "/legacy" + fmt.Sprint(2-round%2)
				patch := testkit.RandomBytes(t, bs)
				off := bs/2 + round
				if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
					f, err := tx.Open(ctx, op)
					if err != nil {
						return err
					}
					_, err = f.WriteAt(patch, int64(off))
					return err
				}); err != nil {
					t.Fatal(err)
				}
				files[op] = append(files[op][:0:0], files[op]...)
				if end := off + len(patch); end > len(files[op]) {
					files[op] = append(files[op], make([]byte, end-len(files[op]))...)
				}
				copy(files[op][off:], patch)
				cl.Close()
			}
		}
		check(fmt.Sprintf("round %d", round), files)
	}
}
