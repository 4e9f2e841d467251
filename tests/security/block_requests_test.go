package security

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
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

// Hostile uses of short blocks and the one-file volume: raw data-protocol
// requests whose lengths disagree with what was written, volumes whose
// entry region is damaged, and volumes of the old layout (with tails)
// converted on open. Whatever happens, a read returns the block's bytes
// or an error, never other bytes.

// rawDN talks the data protocol to one datanode with tickets the test
// seals itself (it holds the cluster's ticket key).
type rawDN struct {
	t    *testing.T
	c    *clustertest.Procs
	dn   *clustertest.Proc
	node uint32
	cred *auth.Credential
	bs   int
}

func newRawDN(t *testing.T, c *clustertest.Procs, dn *clustertest.Proc) *rawDN {
	t.Helper()
	cred, err := auth.LoadCredential(c.AdminCred)
	if err != nil {
		t.Fatal(err)
	}
	r := &rawDN{t: t, c: c, dn: dn, cred: cred, bs: int(c.Opts.Blocksize)}
	for id, a := range datanodeAddrs(t, c) {
		if a == dn.Addr {
			r.node = id
		}
	}
	if r.node == 0 {
		t.Fatalf("datanode %s not registered", dn.Addr)
	}
	return r
}

// ticket seals a one-block ticket; the tags are far from the namenode's,
// the sequence number past every one it issued (a write ticket from before
// the datanode's registration is refused).
func (r *rawDN) ticket(block uint64, write bool, gen uint64) []byte {
	return (&auth.Ticket{Tag: 1<<60 + block, Node: r.node, Start: block, Count: 1, Write: write,
		Expiry: time.Now().Add(time.Hour).Unix(), Gen: gen, Seq: 1<<63 - 1}).Seal(r.c.Secrets.TicketKey)
}

func (r *rawDN) write(block, gen uint64, length uint32, data []byte, crc uint32) *wire.DataResp {
	return testkit.DataCall(r.t, r.dn.Addr, r.cred, &wire.DataReq{Op: wire.DataWrite, Block: block, Length: length, CRC: crc, Ticket: r.ticket(block, true, gen)}, data)
}

func (r *rawDN) adopt(block, gen uint64, length uint32, crc uint32, chain ...wire.Hop) *wire.DataResp {
	return testkit.DataCall(r.t, r.dn.Addr, r.cred, &wire.DataReq{Op: wire.DataAdopt, Block: block, Length: length, CRC: crc, Chain: chain, Ticket: r.ticket(block, true, gen)}, nil)
}

func (r *rawDN) sync() {
	r.t.Helper()
	if resp := testkit.DataCall(r.t, r.dn.Addr, r.cred, &wire.DataReq{Op: wire.DataSync}, nil); resp.Status != wire.OK {
		r.t.Fatalf("sync: %s", resp.Msg)
	}
}

// read returns the block as a reader sees it (the tail zero-filled) and
// checks that the datanode sent no more than pages of data, or returns
// nil and the refusal.
func (r *rawDN) read(block, gen uint64) ([]byte, string) {
	r.t.Helper()
	resp, b := dataRead(r.t, r.cred, heldTicket{addr: r.dn.Addr, node: r.node, block: block, ticket: r.ticket(block, false, gen)})
	if resp.Status != wire.OK {
		return nil, resp.Msg
	}
	if len(b) > r.bs || len(b)%4096 != 0 && len(b) != r.bs {
		r.t.Errorf("block %d: datanode sent %d bytes, not whole pages of a %d-byte block", block, len(b), r.bs)
	}
	out := make([]byte, r.bs)
	copy(out, b)
	if crc := testkit.CRC32C(out); crc != resp.CRC {
		r.t.Errorf("block %d: the bytes sent have CRC %08x, the answer says %08x", block, crc, resp.CRC)
	}
	return out, ""
}

// localWrite writes b into the datanode's data file at block, as a
// short-circuit writer does (the test runs as the datanode's uid).
func (r *rawDN) localWrite(block uint64, b []byte) {
	r.t.Helper()
	f, err := os.OpenFile(filepath.Join(r.dn.Dir, "data"), os.O_WRONLY, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, int64(block)*int64(r.bs)); err != nil {
		r.t.Fatal(err)
	}
}

func padded(data []byte, bs int) []byte {
	b := make([]byte, bs)
	copy(b, data)
	return b
}

// TestHostileShortBlockRequests: DataWrite and DataAdopt whose Length is
// short, longer than a block, or does not match what a local writer put in
// the file, over blocks holding a previous owner's whole block: what is
// accepted reads back exactly (a short block's stale rest never shows, and
// only its pages travel), before and after the datanode restarts; what
// does not match its checksum is refused; a chain forwards only the data
// the Length names, so a local writer's bytes past it are refused by the
// next replica instead of making the replicas differ.
func TestHostileShortBlockRequests(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	r := newRawDN(t, c, c.DNs[0])
	r2 := newRawDN(t, c, c.DNs[1])
	bs := r.bs
	old := testkit.RandomBytes(t, bs) // a previous owner's block, everywhere
	const base = 3000                 // blocks the namenode does not hand out in this test
	for b := uint64(base); b < base+8; b++ {
		for _, d := range []*rawDN{r, r2} {
			if resp := d.write(b, 5, uint32(bs), old, testkit.CRC32C(old)); resp.Status != wire.OK {
				t.Fatalf("full write of block %d: %s", b, resp.Msg)
			}
		}
	}
	want := map[uint64][]byte{}
	expectOK := func(what string, b uint64, resp *wire.DataResp, content []byte) {
		t.Helper()
		if resp.Status != wire.OK {
			t.Fatalf("%s (block %d) refused: %s", what, b, resp.Msg)
		}
		want[b] = padded(content, bs)
	}
	expectRefused := func(what string, resp *wire.DataResp) {
		t.Helper()
		if resp.Status == wire.OK {
			t.Errorf("%s accepted", what)
		}
	}
	hello := []byte("hello, short block")
	// A short write over a whole old block.
	expectOK("write of 18 bytes", base, r.write(base, 6, uint32(len(hello)), hello, testkit.BlockCRC(hello, bs)), hello)
	// A short write of exactly one page, and one a byte past it.
	page := testkit.RandomBytes(t, 4097)
	expectOK("write of one page", base+1, r.write(base+1, 6, 4096, page[:4096], testkit.BlockCRC(page[:4096], bs)), page[:4096])
	expectOK("write of a page and a byte", base+2, r.write(base+2, 6, 4097, page, testkit.BlockCRC(page, bs)), page)
	// Adopt claiming more than a block: the whole block.
	full := testkit.RandomBytes(t, bs)
	r.localWrite(base+3, full)
	expectOK("adopt with Length 3 blocks", base+3, r.adopt(base+3, 6, uint32(3*bs), testkit.CRC32C(full)), full)
	// Adopt claiming less than the writer wrote: only the claimed pages
	// count, so a checksum of the whole write does not match ...
	two := testkit.RandomBytes(t, 8192)
	r.localWrite(base+4, two)
	expectRefused("adopt of 100 bytes whose page holds more, with the whole write's checksum", r.adopt(base+4, 6, 100, testkit.BlockCRC(two, bs)))
	expectRefused("adopt of 100 bytes whose page holds more, with the 100 bytes' checksum", r.adopt(base+4, 6, 100, testkit.BlockCRC(two[:100], bs)))
	// ... and one of the first page is the block: the second page stays
	// out of it.
	expectOK("adopt of 100 bytes with its page's checksum", base+4, r.adopt(base+4, 6, 100, testkit.BlockCRC(two[:4096], bs)), two[:4096])
	// Adopt claiming more than the writer wrote: the old bytes past the
	// write are in the block, so the writer's checksum does not match.
	r.localWrite(base+5, padded(hello, 4096))
	expectRefused("adopt claiming 3 pages after writing one", r.adopt(base+5, 6, 3*4096, testkit.BlockCRC(hello, bs)))
	// A chain: the local replica holds the page, the next one gets only
	// Length bytes.
	r.localWrite(base+6, padded(hello, 4096))
	hop := wire.Hop{Addr: r2.dn.Addr, Block: base + 6, Ticket: r2.ticket(base+6, true, 6)}
	expectOK("chained adopt", base+6, r.adopt(base+6, 6, uint32(len(hello)), testkit.BlockCRC(hello, bs), hop), hello)
	dirty := append(append([]byte(nil), hello...), bytes.Repeat([]byte{0xEE}, 4096-len(hello))...)
	r.localWrite(base+7, dirty)
	hop = wire.Hop{Addr: r2.dn.Addr, Block: base + 7, Ticket: r2.ticket(base+7, true, 6)}
	expectRefused("chained adopt of 18 bytes whose page holds more", r.adopt(base+7, 6, uint32(len(hello)), testkit.BlockCRC(dirty, bs), hop))
	if got, _ := r2.read(base+7, 6); got != nil && !bytes.Equal(got, old) {
		t.Errorf("the next replica of a refused chained adopt holds %q..., neither the old block nor an error", got[:32])
	}
	check := func(when string) {
		t.Helper()
		for b, w := range want {
			got, msg := r.read(b, 6)
			if got == nil {
				t.Errorf("%s: block %d: %s", when, b, msg)
			} else if !bytes.Equal(got, w) {
				t.Errorf("%s: block %d reads %d bytes different from what was written", when, b, testkit.CountDiff(got, w))
			}
		}
		if got, msg := r2.read(base+6, 6); got == nil || !bytes.Equal(got, want[base+6]) {
			t.Errorf("%s: the chained replica of block %d: %v", when, base+6, msg)
		}
	}
	check("before a restart")
	r.sync()
	r2.sync()
	for _, d := range c.DNs {
		c.Kill(d)
		c.StartDatanode(d)
	}
	c.WaitLive(2)
	check("after the datanodes restart")
}

// hostileFiles writes files whose last blocks are short (and one extended
// by truncation past its written data, so its block holds a page and reads
// zeros after it) and returns their contents.
func hostileFiles(t *testing.T, c *clustertest.Procs) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{
		"/tiny":     []byte("x"),
		"/page":     testkit.RandomBytes(t, 4096),
		"/onemore":  testkit.RandomBytes(t, 4097),
		"/blocks":   testkit.RandomBytes(t, 3*bs+100),
		"/exact":    testkit.RandomBytes(t, 2*bs),
		"/extended": nil,
	}
	for p, b := range files {
		if b != nil {
			testkit.WriteFile(t, cl, p, b, 1)
		}
	}
	head := []byte("written before the extension")
	testkit.MustOK(t, "extended file", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.CreateFile(ctx, "/extended", client.CreateOptions{Rep: 1})
		if err != nil {
			return err
		}
		if _, err := f.Write(head); err != nil {
			return err
		}
		return f.Close()
	}))
	testkit.MustOK(t, "extend", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, "/extended")
		if err != nil {
			return err
		}
		if err := f.Truncate(int64(2*bs + 5)); err != nil {
			return err
		}
		return f.Close()
	}))
	files["/extended"] = padded(head, 2*bs+5)
	return files
}

// volumeEntries returns the blocks count, blocksize and entry region of a
// stopped datanode's volume.
func volumeEntries(t *testing.T, dir string) (int64, int64, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Blocks, Blocksize int64
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries := make([]byte, 16*cfg.Blocks)
	if _, err := f.ReadAt(entries, cfg.Blocks*cfg.Blocksize); err != nil {
		t.Fatal(err)
	}
	return cfg.Blocks, cfg.Blocksize, entries
}

// TestHostileLegacyVolumeWithTails: a volume of the layout before the
// one-file volume, complete (crc, gen and tail files, short blocks, whose
// bytes past their pages hold garbage, as reused blocks do), is converted
// when its datanode starts: every file reads exactly, with and without
// short-circuit reads, the old files are gone, and fsck is clean.
func TestHostileLegacyVolumeWithTails(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	files := hostileFiles(t, c)
	dn := c.DNs[0]
	c.Kill(dn)
	blocks, bs, entries := volumeEntries(t, dn.Dir)
	crcs, gens, tails := make([]byte, 4*blocks), make([]byte, 8*blocks), make([]byte, 4*blocks)
	data, err := os.OpenFile(filepath.Join(dn.Dir, "data"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	short := 0
	for i := int64(0); i < blocks; i++ {
		e := entries[16*i:]
		copy(crcs[4*i:], e[0:4])
		copy(tails[4*i:], e[4:8])
		copy(gens[8*i:], e[8:16])
		if tail := int64(binary.LittleEndian.Uint32(e[4:])); tail > 0 && tail < bs {
			short++
			if _, err := data.WriteAt(bytes.Repeat([]byte{0xA5}, int(tail)), (i+1)*bs-tail); err != nil {
				t.Fatal(err)
			}
		}
	}
	if short < 5 {
		t.Fatalf("only %d short blocks on the volume: the test needs the files' short last blocks", short)
	}
	testkit.MustOK(t, "truncate data", data.Truncate(blocks*bs))
	data.Close()
	for name, b := range map[string][]byte{"crc": crcs, "gen": gens, "tail": tails} {
		testkit.MustOK(t, "write "+name, os.WriteFile(filepath.Join(dn.Dir, name), b, 0o600))
	}
	cfgPath := filepath.Join(dn.Dir, "config")
	cb, err := os.ReadFile(cfgPath)
	testkit.MustOK(t, "read config", err)
	var cfg map[string]any
	testkit.MustOK(t, "parse config", json.Unmarshal(cb, &cfg))
	delete(cfg, "layout")
	cb, _ = json.Marshal(cfg)
	testkit.MustOK(t, "write config", os.WriteFile(cfgPath, cb, 0o600))

	c.StartDatanode(dn)
	c.WaitLive(1)
	for _, nosc := range []bool{false, true} {
		for p, err := range testkit.ReadAllFiles(t, c, files, nosc) {
			t.Errorf("%s after the conversion (no short-circuit %v): %v", p, nosc, err)
		}
	}
	for _, name := range []string{"crc", "gen", "tail"} {
		if _, err := os.Stat(filepath.Join(dn.Dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s still there after the conversion: %v", name, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dn.Dir, "data")); err != nil || fi.Size() != blocks*bs+16*blocks {
		t.Errorf("data file after the conversion: %v %v, want %d bytes", fi.Size(), err, blocks*bs+16*blocks)
	}
	if out, code := c.Run(nil, "fsck"); code != 0 || !strings.Contains(out, " 0 problems") {
		t.Errorf("fsck after the conversion: exit %d\n%s", code, out)
	}
}

// TestHostileEntryRegionDamage: a datanode restarted on a volume whose
// entry region was overwritten with garbage serves no wrong bytes (reads
// fail, or return the right data), and fsck reports the damage; one whose
// data file was truncated into the entry region refuses to start, naming
// the file.
func TestHostileEntryRegionDamage(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	files := hostileFiles(t, c)
	dn := c.DNs[0]
	c.Kill(dn)
	blocks, bs, _ := volumeEntries(t, dn.Dir)
	garbage := testkit.RandomBytes(t, int(16*blocks))
	data, err := os.OpenFile(filepath.Join(dn.Dir, "data"), os.O_RDWR, 0)
	testkit.MustOK(t, "open data", err)
	if _, err := data.WriteAt(garbage, blocks*bs); err != nil {
		t.Fatal(err)
	}
	data.Close()
	c.StartDatanode(dn)
	c.WaitLive(1)
	for _, nosc := range []bool{false, true} {
		errs := testkit.ReadAllFiles(t, c, files, nosc)
		if nosc && len(errs) != len(files) {
			// Every file has blocks on the volume, whose entries are
			// garbage now: over TCP none can verify. (Short-circuit
			// readers check the data against the namenode's checksums
			// and may read it right.)
			t.Errorf("over TCP only %d of %d files failed after their entries were overwritten: %v", len(errs), len(files), errs)
		}
	}
	if out, code := c.Run(nil, "fsck"); code == 0 {
		t.Errorf("fsck of a volume whose entries are garbage: exit 0\n%s", out)
	}
	// Truncated into the entry region: refused.
	c.Kill(dn)
	testkit.MustOK(t, "truncate", os.Truncate(filepath.Join(dn.Dir, "data"), blocks*bs+16*blocks-1))
	c.StartDatanode(dn)
	if code := c.Wait(dn); code == 0 {
		t.Fatalf("datanode started on a truncated volume")
	}
	if log := c.ReadLog(dn); !strings.Contains(log, filepath.Join(dn.Dir, "data")+" is truncated") {
		t.Errorf("datanode's refusal does not name the truncated data file:\n%s", log)
	}
}
