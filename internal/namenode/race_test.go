package namenode_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	mrand "math/rand/v2"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// TestNamespaceOpsConcurrently runs the namenode's namespace operations
// from several clients at once on overlapping names, in process (so 'make
// race' runs them under the race detector): create, write, rename (also
// over existing names and across directories), link, unlink, setattr
// (mode, mtime, replication, size), readdir and glob; files unlinked while
// another transaction reads them (orphans); and drop-replicas from a raw
// protocol client that writes its blocks itself. Afterwards fsck is clean,
// no transaction is left open and every used block belongs to a file.
// PLASMA_RACE_SEED=N repeats a run's random choices.
func TestNamespaceOpsConcurrently(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PLASMA_RACE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("PLASMA_RACE_SEED: %v", err)
		}
	}
	t.Logf("seed %d", seed)
	c := clustertest.StartInProcess(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	setup := c.Client(t)
	if err := setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		for _, d := range []string{"/race/a", "/race/b", "/race/o", "/race/d"} {
			if _, err := tx.MkdirAll(ctx, d, 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	const hammerers = 4
	var wg sync.WaitGroup
	var hs []*hammer
	for w := 0; w < hammerers; w++ {
		h := &hammer{t: t, cl: c.Client(t), r: mrand.New(mrand.NewPCG(seed, uint64(w))), bs: 64 << 10, done: map[string]int{}}
		hs = append(hs, h)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200 && !t.Failed(); i++ {
				h.txn(ctx)
			}
		}()
	}
	reader, unlinker := c.Client(t), c.Client(t)
	wg.Add(1)
	go func() {
		defer wg.Done()
		orphans(ctx, t, reader, unlinker, mrand.New(mrand.NewPCG(seed, 100)))
	}()
	dropClient, err := rpc.Dial(ctx, c.Addr, auth.None, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dropClient.Close()
	checker := c.Client(t)
	wg.Add(1)
	go func() {
		defer wg.Done()
		dropReplicas(ctx, t, dropClient, checker, mrand.New(mrand.NewPCG(seed, 200)))
	}()
	wg.Wait()
	t.Logf("operations done after %v", time.Since(began).Round(time.Millisecond))
	total := map[string]int{}
	var commits, aborts, conflicts int
	for _, h := range hs {
		for k, v := range h.done {
			total[k] += v
		}
		commits, aborts, conflicts = commits+h.commits, aborts+h.aborts, conflicts+h.conflicts
	}
	t.Logf("hammerers: %d commits, %d aborts, %d conflicts; successful operations %v", commits, aborts, conflicts, total)
	if t.Failed() {
		return
	}

	rep, err := setup.Fsck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("fsck after concurrent namespace operations (seed %d):\n%s", seed, strings.Join(rep.Problems, "\n"))
	}
	t.Logf("fsck: %d files, %d blocks", rep.Files, rep.Blocks)
	// Every transaction ended; the blocks in use are exactly the blocks of
	// the files (nothing leaked by aborts, drops, truncation or orphans).
	// Frees wait for older transactions and durability, so poll; each
	// round is a transaction of its own, which lets them go.
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for {
		st, err := setup.FsStat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		referenced, err := referencedBlocks(ctx, setup)
		if err != nil {
			t.Fatal(err)
		}
		// The one transaction open is the walk's own (ended by now, but
		// maybe not yet seen): allow it.
		if st.UsedBlocks == referenced && st.OpenTxns == 0 {
			t.Logf("%d blocks used, all referenced (after %v)", referenced, time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d blocks used, %d referenced by files; %d transactions open", st.UsedBlocks, referenced, st.OpenTxns)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// allowed are the outcomes a random namespace operation may have when
// others change the same names.
var allowed = []error{client.ErrNotFound, client.ErrExists, client.ErrIsDir, client.ErrNotDir, client.ErrNotEmpty}

func isAllowed(err error) bool {
	for _, a := range allowed {
		if errors.Is(err, a) {
			return true
		}
	}
	return false
}

type hammer struct {
	t  *testing.T
	cl *client.Client
	r  *mrand.Rand
	bs int
	// What happened: operations that succeeded by kind, commits, aborts
	// and conflicts (logged, so a run that did little shows).
	done                       map[string]int
	commits, aborts, conflicts int
}

func (h *hammer) name() string {
	return fmt.Sprintf("/race/%c/n%d", "ab"[h.r.IntN(2)], h.r.IntN(6))
}

var globs = []string{"/race/*/n?", "/race/a/*", "/race/[ab]/n[0-3]", "/race/*/*", "/race/?/drop*", "/r*/b/n*", "/race/d/*/*", "/race/*/[xy]/n1"}

// op runs one random operation in tx.
func (h *hammer) op(ctx context.Context, tx *client.Txn) (string, error) {
	r := h.r
	k := r.IntN(100)
	switch {
	case k < 15:
		p := h.name()
		f, err := tx.CreateFile(ctx, p, client.CreateOptions{Rep: 1 + r.IntN(2)})
		if err != nil {
			return "create " + p, err
		}
		if n := r.IntN(3 * h.bs); n > 0 {
			if _, err := f.Write(bytes.Repeat([]byte{byte(n)}, n)); err != nil {
				return "write new " + p, err
			}
		}
		return "create " + p, f.Close()
	case k < 25:
		p := h.name()
		f, err := tx.Open(ctx, p)
		if err != nil {
			return "open " + p, err
		}
		if _, err := f.WriteAt(bytes.Repeat([]byte{byte(k)}, 1+r.IntN(h.bs)), r.Int64N(2*int64(h.bs))); err != nil {
			return "write " + p, err
		}
		return "write " + p, f.Close()
	case k < 35:
		p := h.name()
		f, err := tx.Open(ctx, p)
		if err != nil {
			return "open " + p, err
		}
		b, err := io.ReadAll(f)
		if err == nil && int64(len(b)) != f.Size() {
			h.t.Errorf("read %s: %d bytes of a file of %d", p, len(b), f.Size())
		}
		return "read " + p, err
	case k < 50:
		a, b := h.name(), h.name()
		return "rename " + a + " " + b, tx.Rename(ctx, a, b)
	case k < 58:
		a, b := h.name(), h.name()
		return "link " + a + " " + b, tx.Link(ctx, a, b)
	case k < 68:
		p := h.name()
		return "unlink " + p, tx.Unlink(ctx, p)
	case k < 82:
		p := h.name()
		fi, err := tx.Lookup(ctx, p)
		if err != nil {
			return "lookup " + p, err
		}
		var s client.SetAttr
		switch r.IntN(4) {
		case 0:
			m := fs.FileMode(0o600 + r.IntN(0o100))
			s.Mode = &m
		case 1:
			mt := time.Unix(int64(r.IntN(1<<30)), 0)
			s.Mtime = &mt
		case 2:
			// Only down: raising it leaves the existing blocks
			// under-replicated (nothing re-replicates), which fsck
			// rightly reports.
			rep := 1
			s.Rep = &rep
		case 3:
			size := r.Int64N(3 * int64(h.bs))
			s.Size = &size
		}
		_, err = tx.SetAttr(ctx, fi.Ino, s)
		return "setattr " + p, err
	case k < 90:
		g := globs[r.IntN(len(globs))]
		m, err := tx.Glob(ctx, g)
		if err != nil {
			return "glob " + g, err
		}
		if !slices.IsSorted(m) || len(slices.Compact(slices.Clone(m))) != len(m) {
			h.t.Errorf("glob %s: not sorted and unique: %v", g, m)
		}
		for _, p := range m {
			if ok, _ := path.Match(g, p); !ok {
				h.t.Errorf("glob %s returned %s", g, p)
			}
		}
		return "glob " + g, nil
	}
	if k < 96 {
		// Directories moving, appearing and going (with files in them).
		d := func() string { return fmt.Sprintf("/race/d/%c", "xyz"[r.IntN(3)]) }
		switch a, b := d(), d(); r.IntN(4) {
		case 0:
			return "rename " + a + " " + b, tx.Rename(ctx, a, b)
		case 1:
			_, err := tx.Mkdir(ctx, a, 0)
			return "mkdir " + a, err
		case 2:
			return "rmdir " + a, tx.Rmdir(ctx, a)
		default:
			p := fmt.Sprintf("%s/n%d", a, r.IntN(2))
			if r.IntN(2) == 0 {
				return "unlink " + p, tx.Unlink(ctx, p)
			}
			_, err := tx.Create(ctx, p, client.CreateOptions{})
			return "create " + p, err
		}
	}
	d := fmt.Sprintf("/race/%c", "ab"[r.IntN(2)])
	ents, err := tx.ReadDir(ctx, d)
	if err != nil {
		return "readdir " + d, err
	}
	for _, e := range ents {
		if _, err := tx.Lstat(ctx, d+"/"+e.Name); err != nil && !isAllowed(err) && !errors.Is(err, client.ErrConflict) {
			return "lstat " + d + "/" + e.Name, err
		}
	}
	return "readdir " + d, nil
}

func (h *hammer) txn(ctx context.Context) {
	tx := h.cl.Begin()
	n := 1 + h.r.IntN(4)
	for i := 0; i < n; i++ {
		what, err := h.op(ctx, tx)
		if errors.Is(err, client.ErrConflict) {
			tx.Abort(ctx)
			h.conflicts++
			return
		}
		if err == nil {
			h.done[strings.Fields(what)[0]]++
		}
		if err != nil && !isAllowed(err) {
			h.t.Errorf("%s: %v", what, err)
			tx.Abort(ctx)
			return
		}
	}
	if h.r.IntN(5) == 0 {
		if err := tx.Abort(ctx); err != nil {
			h.t.Errorf("abort: %v", err)
		}
		h.aborts++
		return
	}
	switch err := tx.Commit(ctx); {
	case err == nil:
		h.commits++
	case errors.Is(err, client.ErrConflict):
		h.conflicts++
	default:
		h.t.Errorf("commit: %v", err)
	}
}

// orphans: a file is unlinked (and the unlink committed) while another
// transaction reads it; the reader still reads all of it, sometimes
// writes to it too, and the file's blocks are freed when it ends.
func orphans(ctx context.Context, t *testing.T, reader, unlinker *client.Client, r *mrand.Rand) {
	const bs = 64 << 10
	for i := 0; i < 12 && !t.Failed(); i++ {
		p := fmt.Sprintf("/race/o/f%d", i)
		data := make([]byte, (2+r.IntN(8))*bs+r.IntN(bs))
		for k := range data {
			data[k] = byte(r.Uint32())
		}
		if _, err := unlinker.CopyIn(ctx, bytes.NewReader(data), p, client.CopyOptions{Rep: 1 + r.IntN(2)}); err != nil {
			t.Errorf("copy in %s: %v", p, err)
			return
		}
		rtx := reader.Begin()
		f, err := rtx.Open(ctx, p)
		if err != nil {
			t.Errorf("open %s: %v", p, err)
			rtx.Abort(ctx)
			return
		}
		// The unlink commits while the reader reads (ReadAt from several
		// goroutines at once).
		unlinked := make(chan error, 1)
		go func() {
			unlinked <- unlinker.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, p) })
		}()
		got := make([]byte, len(data))
		var rg sync.WaitGroup
		chunk := (len(data) + 3) / 4
		for off := 0; off < len(data); off += chunk {
			rg.Add(1)
			go func() {
				defer rg.Done()
				end := min(off+chunk, len(data))
				if _, err := f.ReadAt(got[off:end], int64(off)); err != nil && err != io.EOF {
					t.Errorf("read %s at %d: %v", p, off, err)
				}
			}()
		}
		rg.Wait()
		if err := <-unlinked; err != nil {
			t.Errorf("unlink %s while open: %v", p, err)
		}
		// After the unlink committed, the open file still reads whole.
		again := make([]byte, len(data))
		if _, err := f.ReadAt(again, 0); err != nil && err != io.EOF {
			t.Errorf("read %s after its unlink: %v", p, err)
		}
		if !bytes.Equal(got, data) || !bytes.Equal(again, data) {
			t.Errorf("%s: an unlinked file open in a transaction reads wrong", p)
		}
		switch i % 3 {
		case 0:
			rtx.Abort(ctx)
		case 1:
			if err := rtx.Commit(ctx); err != nil {
				t.Errorf("read-only commit after reading the orphan %s: %v", p, err)
			}
		case 2:
			// Writing to the unlinked file: committing it must not
			// bring the name back nor leak the blocks.
			if _, err := f.WriteAt([]byte("written after unlink"), int64(bs)); err != nil {
				t.Errorf("write to orphan %s: %v", p, err)
			}
			err := rtx.Commit(ctx)
			if err != nil && !errors.Is(err, client.ErrNotFound) && !errors.Is(err, client.ErrConflict) {
				t.Errorf("commit of a write to the orphan %s: %v", p, err)
			}
			t.Logf("commit of a write to the orphan %s: %v", p, err)
		}
		if _, err := reader.Lookup(ctx, p); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s after its unlink and the reader's end: %v, want not found", p, err)
		}
	}
}

// dropReplicas is a careless client speaking the protocol itself: it
// creates a file with replication 2 in a directory the hammerers use,
// writes the blocks to both datanodes, then drops one datanode's replicas
// (as a client does when a datanode fails its sync) and commits with
// replication 1; or drops both (refused: no replica would be left); or
// aborts after the drop. A committed file reads back through the client.
func dropReplicas(ctx context.Context, t *testing.T, nn *rpc.Conn, cl *client.Client, r *mrand.Rand) {
	const bs = 64 << 10
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for i := 0; i < 20 && !t.Failed(); i++ {
		id := uint64(time.Now().UnixNano())
		first := true
		call := func(q *wire.Request) (*wire.Response, error) {
			q.Txn = id
			if first {
				q.Flags |= wire.FlagBegin
				first = false
			}
			resp, err := nn.Call(ctx, q)
			if err != nil {
				return nil, err
			}
			if resp.Code != wire.OK {
				return resp, &client.Error{Code: client.ErrorCode(resp.Code), Msg: resp.Msg}
			}
			return resp, nil
		}
		abort := func() {
			if _, err := call(&wire.Request{Op: wire.OpAbort}); err != nil {
				t.Errorf("abort: %v", err)
			}
		}
		p := fmt.Sprintf("/race/a/drop%d", i)
		cr, err := call(&wire.Request{Op: wire.OpCreate, Path: p, Type: wire.TypeFile, Rep: 2})
		if err != nil {
			if !errors.Is(err, client.ErrConflict) {
				t.Errorf("create %s: %v", p, err)
			}
			abort()
			continue
		}
		ino := cr.Attr.Ino
		nblocks := 1 + r.IntN(4)
		size := int64(nblocks-1)*bs + 1 + r.Int64N(bs)
		data := make([]byte, size)
		for k := range data {
			data[k] = byte(r.Uint32())
		}
		ar, err := call(&wire.Request{Op: wire.OpAllocate, Ino: ino, Index: 0, Count: uint64(nblocks)})
		if err != nil {
			t.Errorf("allocate for %s: %v", p, err)
			abort()
			return
		}
		nodes := map[uint32]wire.NodeInfo{}
		for _, n := range ar.Nodes {
			nodes[n.ID] = n
		}
		var xs []wire.Extent
		for _, x := range ar.Extents {
			x.CRC = make([]uint32, x.Count)
			for k := range x.CRC {
				idx := x.Index + uint64(k)
				b := data[idx*bs : min(int64(idx+1)*bs, size)]
				x.CRC[k] = crc32.Update(crc32.Checksum(b, castagnoli), castagnoli, make([]byte, bs-len(b)))
				for ri, rp := range x.Replicas {
					var ticket []byte
					if ri < len(x.Tickets) {
						ticket = x.Tickets[ri]
					}
					if err := dataCall(nodes[rp.Node].Addr, &wire.DataReq{Op: wire.DataWrite, Block: rp.Start + uint64(k), Length: uint32(len(b)), CRC: x.CRC[k], Ticket: ticket}, b); err != nil {
						t.Errorf("write block %d of %s: %v", idx, p, err)
						abort()
						return
					}
				}
			}
			x.Tickets = nil
			xs = append(xs, x)
		}
		ids := map[string]bool{}
		for _, x := range xs {
			for _, rp := range x.Replicas {
				ids[nodes[rp.Node].Identity] = true
				if err := dataCall(nodes[rp.Node].Addr, &wire.DataReq{Op: wire.DataSync}, nil); err != nil {
					t.Errorf("sync: %v", err)
				}
			}
		}
		if len(ids) != 2 {
			t.Errorf("%s: replication 2 allocated on %d datanodes", p, len(ids))
			abort()
			return
		}
		if _, err := call(&wire.Request{Op: wire.OpSetBlocks, Ino: ino, Extents: xs, Flags: wire.FlagSize, Size: size}); err != nil {
			t.Errorf("set blocks of %s: %v", p, err)
			abort()
			return
		}
		both := slices.Sorted(maps.Keys(ids))
		victim := both[r.IntN(2)]
		switch i % 3 {
		case 0:
			if _, err := call(&wire.Request{Op: wire.OpDropReplicas, Pref: []string{victim}}); err != nil {
				t.Errorf("drop replicas of %s on %s: %v", p, victim, err)
				abort()
				return
			}
			if _, err := call(&wire.Request{Op: wire.OpSetAttr, Ino: ino, Flags: wire.FlagRep, Rep: 1}); err != nil {
				t.Errorf("set replication of %s: %v", p, err)
				abort()
				return
			}
			if _, err := call(&wire.Request{Op: wire.OpCommit}); err != nil {
				t.Errorf("commit %s after dropping replicas: %v", p, err)
				return
			}
			checkDropped(ctx, t, cl, ino, p, data, victim)
			t.Logf("%s committed with the replicas on %s dropped", p, victim)
		case 1:
			if _, err := call(&wire.Request{Op: wire.OpDropReplicas, Pref: both}); !errors.Is(err, client.ErrUnavailable) {
				t.Errorf("dropping every replica of %s: %v, want ErrUnavailable", p, err)
			}
			abort()
		case 2:
			if _, err := call(&wire.Request{Op: wire.OpDropReplicas, Pref: []string{victim}}); err != nil {
				t.Errorf("drop replicas of %s on %s: %v", p, victim, err)
			}
			abort()
		}
	}
}

// checkDropped reads a committed file whose replicas on victim were
// dropped: one replica each, none on victim, content intact (unless a
// hammerer removed or changed it since).
func checkDropped(ctx context.Context, t *testing.T, cl *client.Client, ino uint64, p string, data []byte, victim string) {
	tx := cl.Begin()
	defer tx.Abort(ctx)
	f, err := tx.OpenInode(ctx, ino)
	if errors.Is(err, client.ErrNotFound) {
		return
	}
	if err != nil {
		t.Errorf("open %s: %v", p, err)
		return
	}
	fi, err := tx.StatInode(ctx, ino)
	if err != nil || fi.Seq > 1 || fi.Size != int64(len(data)) {
		return // changed by a hammerer since
	}
	xs, err := tx.Blocks(ctx, ino)
	if err != nil {
		t.Errorf("blocks of %s: %v", p, err)
		return
	}
	for _, x := range xs {
		if len(x.Replicas) != 1 || x.Replicas[0].Datanode == victim {
			t.Errorf("%s: blocks %d-%d on %v after dropping the replicas on %s", p, x.Index, x.Index+uint64(x.Count)-1, x.Replicas, victim)
		}
	}
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("%s after dropping replicas: %v, %d bytes (want %d) equal=%v", p, err, len(got), len(data), bytes.Equal(got, data))
	}
}

// dataCall sends one data protocol request (and the data of a write) on a
// new connection and checks the answer.
func dataCall(addr string, q *wire.DataReq, data []byte) error {
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer raw.Close()
	nc, err := auth.Client(raw, auth.None, nil)
	if err != nil {
		return err
	}
	if _, err := nc.Write(append(wire.FrameDataHeader(q), data...)); err != nil {
		return err
	}
	resp, err := wire.ReadDataResp(bufio.NewReader(nc))
	if err != nil {
		return err
	}
	if resp.Status != wire.OK {
		return fmt.Errorf("datanode %s: %s", addr, resp.Msg)
	}
	return nil
}

// referencedBlocks counts the block replicas of every file reachable from
// the root (each inode once).
func referencedBlocks(ctx context.Context, cl *client.Client) (uint64, error) {
	tx := cl.Begin()
	defer tx.Abort(ctx)
	seen := map[uint64]bool{}
	var total uint64
	var walk func(dir string) error
	walk = func(dir string) error {
		ents, err := tx.ReadDir(ctx, dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := path.Join(dir, e.Name)
			switch {
			case e.Type == client.TypeDir:
				if err := walk(p); err != nil {
					return err
				}
			case e.Type == client.TypeFile && !seen[e.Ino]:
				seen[e.Ino] = true
				xs, err := tx.Blocks(ctx, e.Ino)
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				for _, x := range xs {
					total += uint64(x.Count * len(x.Replicas))
				}
			}
		}
		return nil
	}
	return total, walk("/")
}
