package extend

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/blockcrc"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Hostile tests of extension in place (docs/design.md "Extension in
// place"): many appenders and readers of old versions at once, appends
// racing with truncates and sparse writes, writers that vanish between
// their extension and its commit, datanodes killed during appends,
// namenode restarts and power cuts between an extension and its commit,
// the block-boundary cases, and appends through the FUSE mount.

// --- records: self-checking appends -----------------------------------

// An x2 record is a 12-byte header (magic, writer, sequence number,
// payload length, CRC32 of header and payload) and its payload. Payloads are
// random, all zeros, or random then zeros, so some appends end in zeros
// (which the extension does not send).
const x2Magic = 0xC3

type x2ID struct{ w, seq int }

func x2Record(w, seq int, r *rand.Rand, maxLen int) []byte {
	return x2RecordEnd(w, seq, r, maxLen, true)
}

// x2RecordEnd is x2Record; without zerosAtEnd the payload's last byte is
// not zero.
func x2RecordEnd(w, seq int, r *rand.Rand, maxLen int, zerosAtEnd bool) []byte {
	n := 1 + r.IntN(maxLen)
	rec := make([]byte, 12+n)
	payload := rec[12:]
	switch r.IntN(4) {
	case 0: // all zeros
	case 1:
		for i := 0; i < n/2; i++ {
			payload[i] = byte(r.Uint32())
		}
	default:
		for i := range payload {
			payload[i] = byte(r.Uint32())
		}
	}
	if !zerosAtEnd {
		payload[n-1] = 0x5A
	}
	rec[0] = x2Magic
	rec[1] = byte(w)
	binary.LittleEndian.PutUint16(rec[2:], uint16(seq))
	binary.LittleEndian.PutUint32(rec[4:], uint32(n))
	binary.LittleEndian.PutUint32(rec[8:], crc32.Update(crc32.ChecksumIEEE(rec[:8]), crc32.IEEETable, payload))
	return rec
}

// x2Parse splits data into records; it fails at the first byte that does
// not begin a whole, intact record.
func x2Parse(data []byte) ([]x2ID, error) {
	var out []x2ID
	off := 0
	for off < len(data) {
		if len(data)-off < 12 || data[off] != x2Magic {
			return out, fmt.Errorf("offset %d of %d: no record header (bytes %x)", off, len(data), data[off:min(off+16, len(data))])
		}
		n := int(binary.LittleEndian.Uint32(data[off+4:]))
		if n > len(data) || off+12+n > len(data) {
			return out, fmt.Errorf("offset %d of %d: record of %d bytes cut off", off, len(data), n)
		}
		h := data[off : off+8]
		if crc32.Update(crc32.ChecksumIEEE(h), crc32.IEEETable, data[off+12:off+12+n]) != binary.LittleEndian.Uint32(data[off+8:]) {
			return out, fmt.Errorf("offset %d of %d: record (writer %d, seq %d) fails its checksum", off, len(data), data[off+1], binary.LittleEndian.Uint16(data[off+2:]))
		}
		out = append(out, x2ID{int(data[off+1]), int(binary.LittleEndian.Uint16(data[off+2:]))})
		off += 12 + n
	}
	return out, nil
}

// x2Append appends rec at the end of path in a transaction of its own
// (retried on conflicts, also past client.TxnAttempts: contention is not
// what these tests are about).
func x2Append(ctx context.Context, cl *client.Client, path string, rec []byte) error {
	for {
		err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, path)
			if err != nil {
				return err
			}
			_, err = f.WriteAt(rec, f.Size())
			return err
		})
		if !errors.Is(err, client.ErrConflict) {
			return err
		}
	}
}

// x2Read reads path whole in a transaction of its own.
func x2Read(ctx context.Context, cl *client.Client, path string) ([]byte, error) {
	tx, _ := cl.Begin(ctx)
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

func x2Hash(b []byte) string {
	h := sha256.Sum256(b)
	return fmt.Sprintf("%x", h[:8])
}

// x2Diff describes where got and want first differ.
func x2Diff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	if i == len(got) && i == len(want) {
		return "equal"
	}
	show := func(b []byte) string {
		if i >= len(b) {
			return "EOF"
		}
		return fmt.Sprintf("%x", b[i:min(i+12, len(b))])
	}
	return fmt.Sprintf("%d bytes read, %d expected; first difference at offset %d (block %d + %d): read %s, want %s",
		len(got), len(want), i, i/(64<<10), i%(64<<10), show(got), show(want))
}

// fsckOnly returns fsck's problems, except those matching one of allowed.
func fsckProblems(t *testing.T, cl *client.Client, allowed ...string) []string {
	t.Helper()
	rep, err := cl.Fsck(context.Background())
	testkit.MustOK(t, "fsck", err)
	var out []string
	for _, p := range rep.Problems {
		ok := false
		for _, a := range allowed {
			if strings.Contains(p, a) {
				ok = true
			}
		}
		if !ok {
			out = append(out, p)
		}
	}
	return out
}

// oldReader holds one committed version open and reads it again and again.
type oldReader struct {
	tx   *client.Txn
	f    *client.File
	data []byte
}

// reread reads the version again (alternately with ReadAt and through
// WriteTo) and reports whether it still reads the same.
func (o *oldReader) reread(k int) error {
	var got []byte
	if k%2 == 0 {
		got = make([]byte, len(o.data))
		n, err := o.f.ReadAt(got, 0)
		if err != nil && !(err == io.EOF && n == len(o.data)) {
			return fmt.Errorf("re-read of a version of %d bytes: %v", len(o.data), err)
		}
		got = got[:n]
	} else {
		if _, err := o.f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, o.f); err != nil {
			return fmt.Errorf("re-read (WriteTo) of a version of %d bytes: %v", len(o.data), err)
		}
		got = buf.Bytes()
	}
	if !bytes.Equal(got, o.data) {
		return fmt.Errorf("a version read again reads differently: %s", x2Diff(got, o.data))
	}
	return nil
}

// TestExtend2ConcurrentAppendersAndOldReaders: six clients (half reading
// local block files themselves, half only through the datanodes) append
// self-checking records to one rep-2 file, each in its own transaction,
// conflicting and retrying; readers meanwhile open version after version,
// keep several open and read each again after later appends extended its
// last block. Every version must consist of whole records and read the
// same every time; at the end every acknowledged record is there exactly
// once and fsck is clean.
func TestExtend2ConcurrentAppendersAndOldReaders(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	const path = "/log"
	testkit.WriteRep2(t, admin, path, x2Record(99, 0, rand.New(rand.NewPCG(1, 1)), 100))
	first := blocksOf(t, admin, path)[0]

	const writers, rounds = 6, 25
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	acked := make([][]x2ID, writers)
	for w := range writers {
		cl := c.Client(client.Config{NoShortCircuit: w%2 == 1})
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for seq := range rounds {
				maxLen := 2000
				if seq%7 == 3 {
					maxLen = 70000 // crosses a block boundary
				}
				// No record ends in zeros: each append must extend in
				// place (TestExtend2AppendAfterTrailingZeros is about
				// those that do).
				if err := x2Append(ctx, cl, path, x2RecordEnd(w, seq, r, maxLen, false)); err != nil {
					errs <- fmt.Errorf("writer %d append %d: %w", w, seq, err)
					return
				}
				acked[w] = append(acked[w], x2ID{w, seq})
			}
		}()
	}
	var stop atomic.Bool
	var rwg sync.WaitGroup
	for k := range 4 {
		cl := c.Client(client.Config{NoShortCircuit: k%2 == 0})
		defer cl.Close()
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			var held []*oldReader
			defer func() {
				for _, o := range held {
					o.tx.Abort(ctx)
				}
			}()
			for i := 0; !stop.Load() || i < 3; i++ {
				tx, _ := cl.Begin(ctx)
				f, err := tx.Open(ctx, path)
				if err != nil {
					errs <- fmt.Errorf("reader %d: open: %w", k, err)
					tx.Abort(ctx)
					return
				}
				data, err := io.ReadAll(f)
				if err != nil {
					errs <- fmt.Errorf("reader %d: read a version of %d bytes: %w", k, f.Size(), err)
					tx.Abort(ctx)
					return
				}
				if _, err := x2Parse(data); err != nil {
					errs <- fmt.Errorf("reader %d: a committed version does not consist of whole records: %w", k, err)
					tx.Abort(ctx)
					return
				}
				held = append(held, &oldReader{tx: tx, f: f, data: data})
				if len(held) > 5 {
					held[0].tx.Abort(ctx)
					held = held[1:]
				}
				for j, o := range held {
					if err := o.reread(i + j); err != nil {
						errs <- fmt.Errorf("reader %d: %w", k, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, cl := range []*client.Client{admin, c.Client(client.Config{NoShortCircuit: true})} {
		data, err := x2Read(ctx, cl, path)
		testkit.MustOK(t, "read the log", err)
		ids, err := x2Parse(data)
		if err != nil {
			t.Fatalf("the final file: %v", err)
		}
		seen := map[x2ID]int{}
		for _, id := range ids {
			seen[id]++
		}
		for _, a := range acked {
			for _, id := range a {
				if seen[id] != 1 {
					t.Errorf("acknowledged record %v is there %d times", id, seen[id])
				}
			}
		}
		if len(ids) != writers*rounds+1 {
			t.Errorf("the file holds %d records, want %d", len(ids), writers*rounds+1)
		}
	}
	// The appends that filled block 0 should have extended it in place;
	// under contention some are copied instead (a lock conflict in
	// OpExtend falls back to copy on write), which
	// TestExtend2TransientLockConflictCopiesBlock shows deterministically.
	if last := blocksOf(t, admin, path)[0]; last != first {
		t.Logf("block 0 moved (%s → %s): some appends were copied, not extended in place", first, last)
	}
	if p := fsckProblems(t, admin); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}

type x2Commit struct {
	who           string
	before, after string // content hashes
	op            string
}

// x2Op applies one random change to f (whose content is cur) and returns
// the expected content and a description.
func x2Op(t *testing.T, f *client.File, cur []byte, r *rand.Rand, bs int) ([]byte, string, error) {
	size := int64(len(cur))
	want := bytes.Clone(cur)
	grow := func(n int64) {
		if n > int64(len(want)) {
			want = append(want, make([]byte, n-int64(len(want)))...)
		}
	}
	write := func(b []byte, off int64) error {
		if _, err := f.WriteAt(b, off); err != nil {
			return err
		}
		grow(off + int64(len(b)))
		copy(want[off:], b)
		return nil
	}
	trunc := func(n int64) error {
		if err := f.Truncate(n); err != nil {
			return err
		}
		if n < int64(len(want)) {
			want = want[:n]
		} else {
			grow(n)
		}
		return nil
	}
	k := r.IntN(12)
	if size > 300000 && k < 8 {
		k = 8 + r.IntN(2) // keep the file small: truncate down
	}
	var desc string
	var err error
	switch k {
	case 0, 1, 2:
		b := testkit.SeededBytes(1+r.IntN(600), r.Uint64())
		desc, err = fmt.Sprintf("append %d at %d", len(b), size), write(b, size)
	case 3:
		b := testkit.SeededBytes(bs/2+r.IntN(bs), r.Uint64())
		desc, err = fmt.Sprintf("append %d crossing blocks at %d", len(b), size), write(b, size)
	case 4:
		b := make([]byte, 1+r.IntN(5000))
		desc, err = fmt.Sprintf("append %d zeros at %d", len(b), size), write(b, size)
	case 5:
		b := append(testkit.SeededBytes(1+r.IntN(300), r.Uint64()), make([]byte, 1+r.IntN(3000))...)
		desc, err = fmt.Sprintf("append %d ending in zeros at %d", len(b), size), write(b, size)
	case 6:
		off := size + 1 + r.Int64N(int64(2*bs))
		b := testkit.SeededBytes(1+r.IntN(100), r.Uint64())
		desc, err = fmt.Sprintf("sparse write of %d at %d (size %d)", len(b), off, size), write(b, off)
	case 7:
		n := size + 1 + r.Int64N(int64(bs))
		desc, err = fmt.Sprintf("truncate up %d→%d", size, n), trunc(n)
	case 8, 9:
		if size < 2 {
			return want, "nothing", nil
		}
		n := 1 + r.Int64N(size-1)
		desc, err = fmt.Sprintf("truncate down %d→%d", size, n), trunc(n)
	case 10:
		if size < 2 {
			return want, "nothing", nil
		}
		n := 1 + r.Int64N(size-1)
		b := testkit.SeededBytes(1+r.IntN(500), r.Uint64())
		desc = fmt.Sprintf("truncate down %d→%d, then append %d", size, n, len(b))
		if err = trunc(n); err == nil {
			err = write(b, n)
		}
	case 11:
		b := testkit.SeededBytes(1+r.IntN(500), r.Uint64())
		n := size + int64(len(b)/2)
		desc = fmt.Sprintf("append %d at %d, then truncate to %d", len(b), size, n)
		if err = write(b, size); err == nil {
			if err = f.Flush(context.Background()); err == nil {
				err = trunc(n)
			}
		}
	}
	return want, desc, err
}

// TestExtend2AppendsRaceTruncatesAndSparseWrites: four clients change one
// file concurrently, each transaction reading it whole and then appending
// (small, across blocks, zeros, ending in zeros), truncating down or up,
// writing past the end, or truncating and appending in one transaction;
// each checks, before committing, that the file reads as its model. As
// the first committer wins, the commits must form one chain of versions
// (each based on the one before), readers of old versions must keep
// reading them, every version a reader saw must be one that was committed,
// and the last must be what the file holds.
func TestExtend2AppendsRaceTruncatesAndSparseWrites(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3})
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	admin := c.Client(client.Config{})
	defer admin.Close()
	const path = "/f"
	initial := testkit.SeededBytes(40000, 1)
	testkit.WriteRep2(t, admin, path, initial)

	var mu sync.Mutex
	var commits []x2Commit
	contents := map[string][]byte{x2Hash(initial): initial}
	errs := make(chan error, 100)
	var wg sync.WaitGroup
	for w := range 4 {
		cl := c.Client(client.Config{NoShortCircuit: w%2 == 1})
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 3))
			for i := 0; i < 25; i++ {
				var cm x2Commit
				var after []byte
				err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
					f, err := tx.Open(ctx, path)
					if err != nil {
						return err
					}
					cur, err := io.ReadAll(f)
					if err != nil {
						return err
					}
					want, desc, err := x2Op(t, f, cur, r, bs)
					if err != nil {
						return fmt.Errorf("%s: %w", desc, err)
					}
					got := make([]byte, len(want)+10)
					n, err := f.ReadAt(got, 0)
					if err != io.EOF {
						return fmt.Errorf("%s: read back in the transaction: %d bytes, %v", desc, n, err)
					}
					if !bytes.Equal(got[:n], want) {
						return fmt.Errorf("%s: before the commit, the transaction reads its file wrongly: %s", desc, x2Diff(got[:n], want))
					}
					cm = x2Commit{who: fmt.Sprintf("client %d op %d", w, i), before: x2Hash(cur), after: x2Hash(want), op: desc}
					after = want
					return nil
				})
				if errors.Is(err, client.ErrConflict) {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("client %d op %d: %w", w, i, err)
					return
				}
				if cm.before != cm.after {
					mu.Lock()
					commits = append(commits, cm)
					contents[cm.after] = after
					mu.Unlock()
				}
			}
		}()
	}
	var stop atomic.Bool
	var rwg sync.WaitGroup
	var seenMu sync.Mutex
	seen := map[string]bool{}
	for k := range 2 {
		cl := c.Client(client.Config{NoShortCircuit: k == 0})
		defer cl.Close()
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			var held []*oldReader
			defer func() {
				for _, o := range held {
					o.tx.Abort(ctx)
				}
			}()
			for i := 0; !stop.Load(); i++ {
				tx, _ := cl.Begin(ctx)
				f, err := tx.Open(ctx, path)
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", k, err)
					return
				}
				data, err := io.ReadAll(f)
				if err != nil {
					errs <- fmt.Errorf("reader %d: read a version of %d bytes: %w", k, f.Size(), err)
					return
				}
				seenMu.Lock()
				seen[x2Hash(data)] = true
				seenMu.Unlock()
				held = append(held, &oldReader{tx: tx, f: f, data: data})
				if len(held) > 4 {
					held[0].tx.Abort(ctx)
					held = held[1:]
				}
				for j, o := range held {
					if err := o.reread(i + j); err != nil {
						errs <- fmt.Errorf("reader %d: %w", k, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	// The commits must chain from the initial content.
	byBefore := map[string][]int{}
	for i, cm := range commits {
		byBefore[cm.before] = append(byBefore[cm.before], i)
	}
	used := make([]bool, len(commits))
	var chain []int
	var walk func(cur string) bool
	walk = func(cur string) bool {
		if len(chain) == len(commits) {
			return true
		}
		for _, i := range byBefore[cur] {
			if used[i] {
				continue
			}
			used[i] = true
			chain = append(chain, i)
			if walk(commits[i].after) {
				return true
			}
			chain = chain[:len(chain)-1]
			used[i] = false
		}
		return false
	}
	if !walk(x2Hash(initial)) {
		var lines []string
		for _, cm := range commits {
			lines = append(lines, fmt.Sprintf("%s: %s → %s: %s", cm.who, cm.before, cm.after, cm.op))
		}
		t.Fatalf("the %d commits do not form one chain of versions (a lost update, or a commit based on a version never committed):\n%s", len(commits), strings.Join(lines, "\n"))
	}
	final := x2Hash(initial)
	if len(chain) > 0 {
		final = commits[chain[len(chain)-1]].after
	}
	for h := range seen {
		if contents[h] == nil {
			t.Errorf("a reader saw a version (%s) that no transaction committed", h)
		}
	}
	for _, cl := range []*client.Client{admin, c.Client(client.Config{NoShortCircuit: true})} {
		got, err := x2Read(ctx, cl, path)
		testkit.MustOK(t, "read the file", err)
		if !bytes.Equal(got, contents[final]) {
			t.Errorf("the file is not the last committed version (%s): %s", commits[chain[len(chain)-1]].op, x2Diff(got, contents[final]))
		}
	}
	t.Logf("%d commits chained; readers saw %d versions", len(commits), len(seen))
	if p := fsckProblems(t, admin); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}

// x2Flushed begins a transaction on cl that appends data to path and
// flushes it (the extension reaches the datanodes) without committing.
func x2Flushed(t *testing.T, ctx context.Context, cl *client.Client, path string, data []byte) (*client.Txn, *client.File) {
	t.Helper()
	tx, _ := cl.Begin(ctx)
	f, err := tx.Open(ctx, path)
	testkit.MustOK(t, "open for the abandoned append", err)
	_, err = f.WriteAt(data, f.Size())
	testkit.MustOK(t, "abandoned append", err)
	testkit.MustOK(t, "flush the abandoned append", f.Flush(ctx))
	return tx, f
}

// x2Check compares path, read by each client, with want.
func x2Check(t *testing.T, what, path string, want []byte, cls ...*client.Client) {
	t.Helper()
	for i, cl := range cls {
		got, err := x2Read(context.Background(), cl, path)
		if err != nil {
			t.Fatalf("%s: client %d: read %s: %v", what, i, path, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: client %d: %s reads wrongly: %s", what, i, path, x2Diff(got, want))
		}
	}
}

// TestExtend2VanishedWriterNeverExposed: a writer extends the last block
// in place (the bytes reach both replicas) and then vanishes without
// committing: its client is closed, so the namenode aborts it. Another
// client, already retrying against the writer's lock, then appends; others
// grow the file by a truncate upwards and by a write further on, append
// zeros, and read with and without short-circuit. The vanished writer's
// bytes never show, and fsck stays clean. Done for a file of one partly
// filled block, one whose last block is the second, and one whose
// committed bytes end in zeros.
func TestExtend2VanishedWriterNeverExposed(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	cl := c.Client(client.Config{})
	defer cl.Close()
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	evil := bytes.Repeat([]byte{0xA5}, 9000)
	for i, base := range [][]byte{
		testkit.SeededBytes(40000, 11),
		testkit.SeededBytes(bs+1000, 12),
		append(testkit.SeededBytes(20000, 13), make([]byte, 15000)...),
	} {
		path := fmt.Sprintf("/v%d", i)
		testkit.WriteRep2(t, cl, path, base)
		want := bytes.Clone(base)

		// 1. Vanish after the flush; an appender already waits.
		w1 := c.Client(client.Config{})
		x2Flushed(t, ctx, w1, path, evil)
		attempts := make(chan struct{}, 1000)
		add := testkit.SeededBytes(100, uint64(20+i))
		done := make(chan error, 1)
		go func() {
			done <- x2AppendCounting(ctx, tcp, path, add, attempts)
		}()
		<-attempts
		<-attempts // the appender met the writer's lock at least once
		w1.Close()
		testkit.MustOK(t, "append after the writer vanished", <-done)
		want = append(want, add...)
		x2Check(t, "after a vanished writer and an append", path, want, cl, tcp)

		// 2. Vanish again with more bytes; then a truncate upwards.
		w2 := c.Client(client.Config{})
		x2Flushed(t, ctx, w2, path, evil)
		w2.Close()
		fi, err := cl.Lookup(ctx, path)
		testkit.MustOK(t, "lookup", err)
		up := int64(len(want) + 5000)
		testkit.MustOK(t, "truncate up", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			return tx.Truncate(ctx, fi.Ino, up)
		}))
		want = append(want, make([]byte, 5000)...)
		x2Check(t, "after a vanished writer and a truncate upwards", path, want, cl, tcp)

		// 3. Vanish again; then a write two blocks further on.
		w3 := c.Client(client.Config{})
		x2Flushed(t, ctx, w3, path, evil)
		w3.Close()
		far := int64(len(want) + 2*bs)
		testkit.MustOK(t, "write further on", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, path)
			if err != nil {
				return err
			}
			_, err = f.WriteAt([]byte("far"), far)
			return err
		}))
		want = append(append(want, make([]byte, far-int64(len(want)))...), "far"...)
		x2Check(t, "after a vanished writer and a write further on", path, want, cl, tcp)

		// 4. Vanish again; then an append of zeros only (nothing to send)
		// and an append after it.
		w4 := c.Client(client.Config{})
		x2Flushed(t, ctx, w4, path, evil)
		w4.Close()
		testkit.MustOK(t, "append zeros", x2Append(ctx, cl, path, make([]byte, 3000)))
		want = append(want, make([]byte, 3000)...)
		x2Check(t, "after a vanished writer and an append of zeros", path, want, cl, tcp)
		testkit.MustOK(t, "append", x2Append(ctx, tcp, path, []byte("tail")))
		want = append(want, "tail"...)
		x2Check(t, "after an append of zeros and an append", path, want, cl, tcp)

		// 5. A writer that extends and then, in the same transaction, grows
		// the file past the block and commits.
		testkit.MustOK(t, "append and grow", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, path)
			if err != nil {
				return err
			}
			if _, err := f.WriteAt([]byte("xyz"), f.Size()); err != nil {
				return err
			}
			if err := f.Flush(ctx); err != nil {
				return err
			}
			return f.Truncate(f.Size() + int64(bs))
		}))
		want = append(append(want, "xyz"...), make([]byte, bs)...)
		x2Check(t, "after an append and a truncate upwards in one transaction", path, want, cl, tcp)
	}
	if p := fsckProblems(t, cl); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}

// x2AppendCounting is x2Append that signals every attempt on attempts.
func x2AppendCounting(ctx context.Context, cl *client.Client, path string, rec []byte, attempts chan<- struct{}) error {
	for {
		err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			select {
			case attempts <- struct{}{}:
			default:
			}
			f, err := tx.Open(ctx, path)
			if err != nil {
				return err
			}
			if _, err := f.WriteAt(rec, f.Size()); err != nil {
				return err
			}
			return f.Flush(ctx)
		})
		if !errors.Is(err, client.ErrConflict) {
			return err
		}
	}
}

// TestExtend2DatanodeKilledDuringAppends: a client appends to a rep-2 file
// (three datanodes), committing each append; after ten appends one
// datanode holding the last block is killed with SIGKILL while the next
// appends run. Appends go on (the extension falls back to copy on write,
// or the dead replica is dropped at commit); every acknowledged append
// reads back, with and without short-circuit, before and after the
// datanode comes back; fsck reports nothing but missing replicas.
func TestExtend2DatanodeKilledDuringAppends(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	const path = "/dn"
	base := testkit.SeededBytes(30000, 1)
	testkit.WriteRep2(t, cl, path, base)

	var mu sync.Mutex
	want := bytes.Clone(base)
	var failed []string
	tenth := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 60; i++ {
			add := testkit.SeededBytes(1+i*37%900, uint64(100+i))
			err := x2Append(ctx, cl, path, add)
			mu.Lock()
			if err == nil {
				want = append(want, add...)
			} else {
				failed = append(failed, fmt.Sprintf("append %d: %v", i, err))
			}
			mu.Unlock()
			if i == 9 {
				close(tenth)
			}
		}
	}()
	<-tenth
	// The datanode holding the first replica of the last block.
	last := uint64(0)
	for idx := range blocksOf(t, tcp, path) {
		last = max(last, idx)
	}
	var victim *clustertest.Proc
	for _, ex := range x2Extents(t, tcp, path) {
		if ex.Index <= last && last < ex.Index+uint64(ex.Count) {
			for _, p := range c.DNs {
				if p.Addr == ex.Replicas[0].Addr {
					victim = p
				}
			}
		}
	}
	if victim == nil {
		t.Fatal("no datanode found for the last block")
	}
	c.Kill(victim)
	mu.Lock()
	atKill := len(want)
	mu.Unlock()
	<-done
	mu.Lock()
	t.Logf("killed datanode %s at %d bytes; %d bytes appended after; %d appends failed: %q", victim.Addr, atKill, len(want)-atKill, len(failed), failed)
	final := bytes.Clone(want)
	mu.Unlock()
	if len(failed) > 0 {
		// A failed append is not acknowledged; but it must have said so
		// cleanly, and nothing of it may show (checked below).
		for _, f := range failed {
			if strings.Contains(f, "panic") || strings.Contains(f, "goroutine") {
				t.Errorf("an append failed with a stack trace: %s", f)
			}
		}
	}
	x2Check(t, "after the datanode was killed", path, final, cl, tcp)

	c.StartDatanode(victim)
	c.WaitLive(3)
	for i := 0; i < 10; i++ {
		add := testkit.SeededBytes(1+i*53%700, uint64(300+i))
		testkit.MustOK(t, "append after the datanode came back", x2Append(ctx, tcp, path, add))
		final = append(final, add...)
	}
	x2Check(t, "after the datanode came back", path, final, cl, tcp)
	rep, err := cl.Fsck(ctx)
	testkit.MustOK(t, "fsck", err)
	t.Logf("fsck: %q", rep.Problems)
	if p := fsckProblems(t, cl, "replicas"); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}

// x2Extents returns the block list of path.
func x2Extents(t *testing.T, cl *client.Client, path string) []client.Extent {
	t.Helper()
	var xs []client.Extent
	testkit.MustOK(t, "blocks", cl.Txn(context.Background(), func(ctx context.Context, tx *client.Txn) error {
		fi, err := tx.Lookup(ctx, path)
		if err != nil {
			return err
		}
		xs, err = tx.Blocks(ctx, fi.Ino)
		return err
	}))
	return xs
}

// TestExtend2NamenodeRestartBeforeCommit: a writer's extension reaches the
// datanodes, then the namenode is killed and restarted before the commit.
// The commit must fail, nothing of the extension may show, and appends by
// the same client (reconnected) and by a new one must extend the file
// correctly; a reader that opened the file before reads its version; fsck
// (library and CLI) is clean.
func TestExtend2NamenodeRestartBeforeCommit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	const path = "/nn"
	base := testkit.SeededBytes(45000, 1)
	testkit.WriteRep2(t, cl, path, base)
	want := bytes.Clone(base)
	for i := 0; i < 3; i++ {
		add := testkit.SeededBytes(700, uint64(10+i))
		testkit.MustOK(t, "append", x2Append(ctx, cl, path, add))
		want = append(want, add...)
	}
	before := blocksOf(t, cl, path)

	tx, f := x2Flushed(t, ctx, cl, path, bytes.Repeat([]byte{0xA5}, 12000))
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(2)
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("a commit of a transaction begun before the namenode restarted succeeded")
	} else {
		t.Logf("commit after the restart: %v", err)
	}
	_ = f
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	x2Check(t, "after the restart", path, want, tcp)
	// The same client, reconnecting (its first attempt may meet the old
	// connection's end).
	var err error
	add := testkit.SeededBytes(300, 50)
	for attempt := 0; attempt < 3; attempt++ {
		if err = x2Append(ctx, cl, path, add); err == nil {
			break
		}
	}
	testkit.MustOK(t, "append by the same client after the restart", err)
	want = append(want, add...)
	add = testkit.SeededBytes(20000, 51)
	testkit.MustOK(t, "append by a new client", x2Append(ctx, tcp, path, add))
	want = append(want, add...)
	x2Check(t, "after appends following the restart", path, want, cl, tcp)
	if after := blocksOf(t, cl, path); after[0] != before[0] {
		t.Logf("block 0 moved %s → %s (copied, not extended)", before[0], after[0])
	}
	if p := fsckProblems(t, cl); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
	c.MustRun("fsck")
}

// TestExtend2DatanodeDiesBetweenExtensionAndCommit: the extension of a
// rep-2 file's last block reaches both replicas, then the datanode of one
// of them (the first of the chain, or the second) is killed with SIGKILL
// before the commit; in a third round it is killed before the flush, so
// the extension itself fails. Each commit must either succeed with every
// byte readable or fail saying so with nothing of it visible; after the
// datanodes come back, appends go on, every acknowledged byte reads back
// through both paths, and fsck reports nothing worse than missing
// replicas.
func TestExtend2DatanodeDiesBetweenExtensionAndCommit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 4})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	dnOf := func(addr string) *clustertest.Proc {
		for _, p := range c.DNs {
			if p.Addr == addr {
				return p
			}
		}
		t.Fatalf("no datanode at %s", addr)
		return nil
	}
	for round, mode := range []string{"second replica after the flush", "first replica after the flush", "first replica before the flush"} {
		path := fmt.Sprintf("/d%d", round)
		base := testkit.SeededBytes(30000+round*1000, uint64(round))
		testkit.WriteRep2(t, cl, path, base)
		want := bytes.Clone(base)
		xs := x2Extents(t, tcp, path)
		if len(xs) != 1 || len(xs[0].Replicas) != 2 {
			t.Fatalf("%s: block list %+v", path, xs)
		}
		which := 1
		if round > 0 {
			which = 0
		}
		victim := dnOf(xs[0].Replicas[which].Addr)
		// A reader of the first version, opened before.
		old := &oldReader{data: bytes.Clone(base)}
		old.tx, _ = tcp.Begin(ctx)
		var err error
		old.f, err = old.tx.Open(ctx, path)
		testkit.MustOK(t, "open an old reader", err)

		add := testkit.SeededBytes(5000, uint64(40+round))
		tx, _ := cl.Begin(ctx)
		f, err := tx.Open(ctx, path)
		testkit.MustOK(t, "open", err)
		_, err = f.WriteAt(add, f.Size())
		testkit.MustOK(t, "append", err)
		if mode == "first replica before the flush" {
			c.Kill(victim)
		}
		ferr := f.Flush(ctx)
		if mode != "first replica before the flush" {
			testkit.MustOK(t, mode+": flush", ferr)
			c.Kill(victim)
		}

		cerr := ferr
		if cerr == nil {
			cerr = tx.Commit(ctx)
		} else {
			tx.Abort(ctx)
		}
		t.Logf("%s: flush %v, commit %v", mode, ferr, cerr)
		if cerr == nil {
			want = append(want, add...)
		}
		x2Check(t, mode+": after the commit", path, want, cl, tcp)
		if err := old.reread(round); err != nil {
			t.Errorf("%s: reader of the first version: %v", mode, err)
		}
		old.tx.Abort(ctx)
		// More appends with the datanode still down.
		for i := 0; i < 3; i++ {
			add := testkit.SeededBytes(777, uint64(60+10*round+i))
			testkit.MustOK(t, mode+": append with the datanode down", x2Append(ctx, cl, path, add))
			want = append(want, add...)
		}
		x2Check(t, mode+": after appends with the datanode down", path, want, cl, tcp)
		c.StartDatanode(victim)
		c.WaitLive(4)
		for i := 0; i < 3; i++ {
			add := testkit.SeededBytes(555, uint64(90+10*round+i))
			testkit.MustOK(t, mode+": append after the datanode came back", x2Append(ctx, tcp, path, add))
			want = append(want, add...)
		}
		x2Check(t, mode+": after the datanode came back", path, want, cl, tcp)
	}
	rep, err := cl.Fsck(ctx)
	testkit.MustOK(t, "fsck", err)
	t.Logf("fsck: %q", rep.Problems)
	if p := fsckProblems(t, cl, "replicas"); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}

// TestExtend2PowerCutAfterCommittedAndUncommittedAppends: committed
// appends to rep-2 files, then extensions that are not committed: one
// still open, one aborted, and in a second file one made durable on the
// datanodes by another transaction's commit (which syncs the same
// volumes), so after the cut the datanodes hold bytes and checksums of a
// version nobody committed. The power fails. Every committed byte must
// read back (short-circuit and through the datanodes), none of the
// uncommitted ones, fsck (library and CLI) must be clean, and appends
// after the restart must work and read back.
func TestExtend2PowerCutAfterCommittedAndUncommittedAppends(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{}
	for i, path := range []string{"/p1", "/p2", "/p3"} {
		base := testkit.SeededBytes(20000+i*30000, uint64(i))
		testkit.WriteRep2(t, cl, path, base)
		files[path] = base
		for k := 0; k < 10; k++ {
			add := testkit.SeededBytes(1+k*331%2000, uint64(10*i+k))
			testkit.MustOK(t, "append", x2Append(ctx, cl, path, add))
			files[path] = append(files[path], add...)
		}
	}
	evil := bytes.Repeat([]byte{0xA5}, 7000)
	// /p1: an extension left open.
	w1 := c.Client(client.Config{})
	defer w1.Close()
	x2Flushed(t, ctx, w1, "/p1", evil)
	// /p2: an aborted extension.
	tx2, _ := x2Flushed(t, ctx, cl, "/p2", evil)
	testkit.MustOK(t, "abort", tx2.Abort(ctx))
	// /p3: an aborted extension, then a commit elsewhere that syncs the
	// volumes (a new rep-2 file lands on both datanodes).
	tx3, _ := x2Flushed(t, ctx, cl, "/p3", evil)
	testkit.MustOK(t, "abort", tx3.Abort(ctx))
	testkit.WriteRep2(t, cl, "/sync", testkit.SeededBytes(5000, 77))
	files["/sync"] = testkit.SeededBytes(5000, 77)

	c.PowerCut()

	after := c.Client(client.Config{})
	defer after.Close()
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	for path, want := range files {
		x2Check(t, "after the power cut", path, want, after, tcp)
	}
	if p := fsckProblems(t, after); len(p) > 0 {
		t.Fatalf("fsck after the power cut: %q", p)
	}
	c.MustRun("fsck")
	for path := range files {
		for k := 0; k < 3; k++ {
			add := testkit.SeededBytes(100+k, uint64(len(path)*7+k))
			testkit.MustOK(t, "append after the power cut", x2Append(ctx, after, path, add))
			files[path] = append(files[path], add...)
		}
		x2Check(t, "appends after the power cut", path, files[path], after, tcp)
	}
	if p := fsckProblems(t, after); len(p) > 0 {
		t.Fatalf("fsck after appends following the power cut: %q", p)
	}
}

// TestExtend2PowerCutDuringConcurrentAppends: three clients append
// self-checking records to two rep-2 files while the power fails. After
// the restart every acknowledged record is there exactly once, the files
// consist of whole, intact records only (no torn or uncommitted bytes),
// records whose commit failed appear at most once, fsck is clean, and
// appending goes on.
func TestExtend2PowerCutDuringConcurrentAppends(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	paths := []string{"/a", "/b"}
	for _, p := range paths {
		testkit.WriteRep2(t, admin, p, x2Record(99, 0, rand.New(rand.NewPCG(1, 1)), 3000))
	}
	type result struct {
		acked, doubt map[x2ID]string // record → path
	}
	const writers = 3
	results := make([]result, writers)
	var total atomic.Int64
	enough := make(chan struct{})
	var once sync.Once
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range writers {
		cl := c.Client(client.Config{NoShortCircuit: w == 1})
		defer cl.Close()
		results[w] = result{map[x2ID]string{}, map[x2ID]string{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 5))
			for seq := 0; !stop.Load() && seq < 400; seq++ {
				path := paths[r.IntN(len(paths))]
				maxLen := 1500
				if seq%9 == 4 {
					maxLen = 40000
				}
				err := x2Append(ctx, cl, path, x2Record(w, seq, r, maxLen))
				if err == nil {
					results[w].acked[x2ID{w, seq}] = path
					if total.Add(1) >= 30 {
						once.Do(func() { close(enough) })
					}
				} else {
					// The power failed (or is failing): stop here, so
					// nothing is written while the cluster restarts.
					results[w].doubt[x2ID{w, seq}] = path
					return
				}
			}
		}()
	}
	<-enough
	c.PowerCut()
	stop.Store(true)
	wg.Wait()

	after := c.Client(client.Config{})
	defer after.Close()
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	for _, cl := range []*client.Client{after, tcp} {
		for _, p := range paths {
			data, err := x2Read(ctx, cl, p)
			testkit.MustOK(t, "read "+p+" after the power cut", err)
			ids, err := x2Parse(data)
			if err != nil {
				t.Fatalf("%s after the power cut: %v", p, err)
			}
			seen := map[x2ID]int{}
			for _, id := range ids {
				seen[id]++
				if id.w == 99 {
					continue
				}
				r := results[id.w]
				if r.acked[id] != p && r.doubt[id] != p {
					t.Errorf("%s holds record %v, which was never appended to it", p, id)
				}
			}
			for id, n := range seen {
				if n > 1 {
					t.Errorf("%s holds record %v %d times", p, id, n)
				}
			}
			for _, r := range results {
				for id, q := range r.acked {
					if q == p && seen[id] != 1 {
						t.Errorf("acknowledged record %v of %s is lost", id, p)
					}
				}
			}
		}
	}
	acked, doubt := 0, 0
	for _, r := range results {
		acked += len(r.acked)
		doubt += len(r.doubt)
	}
	t.Logf("%d appends acknowledged, %d failed", acked, doubt)
	if p := fsckProblems(t, after); len(p) > 0 {
		t.Fatalf("fsck after the power cut: %q", p)
	}
	for _, p := range paths {
		testkit.MustOK(t, "append after the power cut", x2Append(ctx, after, p, x2Record(98, 1, rand.New(rand.NewPCG(2, 2)), 500)))
		data, err := x2Read(ctx, tcp, p)
		testkit.MustOK(t, "read", err)
		if _, err := x2Parse(data); err != nil {
			t.Fatalf("%s after an append following the power cut: %v", p, err)
		}
	}
	if p := fsckProblems(t, after); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}

// TestExtend2EdgeCases: appends at and across block boundaries and
// combined with other changes in one transaction: a file of exactly one
// block, of one byte, an append that fills the last block exactly and one
// after it, one crossing into the next block, zero-length appends, appends
// of zeros and ending in zeros (which the extension does not send) onto
// committed bytes that end in zeros, a truncate down then an append in one
// transaction, a truncate up across blocks then an append onto the hole,
// three flushes of appends in one transaction, two File handles of one
// file in one transaction, and an append to a rep-1 file. After each, the
// file reads as its model through both read paths, readers that opened
// every earlier version (through both paths) still read theirs, and at the
// end fsck is clean. Simple appends must extend the last block in place.
func TestExtend2EdgeCases(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	cl := c.Client(client.Config{})
	defer cl.Close()
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	var olds []*oldReader
	defer func() {
		for _, o := range olds {
			o.tx.Abort(ctx)
		}
	}()
	hold := func(path string, want []byte) {
		for _, rc := range []*client.Client{cl, tcp} {
			o := &oldReader{data: bytes.Clone(want)}
			o.tx, _ = rc.Begin(ctx)
			var err error
			o.f, err = o.tx.Open(ctx, path)
			testkit.MustOK(t, "open an old reader", err)
			olds = append(olds, o)
		}
	}
	type step struct {
		what string
		do   func(tx *client.Txn, f *client.File, want []byte) ([]byte, error)
	}
	appendStep := func(what string, data []byte) step {
		return step{what, func(tx *client.Txn, f *client.File, want []byte) ([]byte, error) {
			_, err := f.WriteAt(data, f.Size())
			return append(want, data...), err
		}}
	}
	inPlace := func(path string, idx uint64) func() {
		before := blocksOf(t, tcp, path)[idx]
		return func() {
			t.Helper()
			if after := blocksOf(t, tcp, path)[idx]; after != before {
				t.Errorf("%s: block %d moved (%s → %s): the append was not an extension in place", path, idx, before, after)
			}
		}
	}
	cases := []struct {
		path  string
		rep   int
		base  []byte
		steps []step
		// inPlace: the block the first step must extend in place (-1: none).
		inPlace int
	}{
		{"/one-block", 2, testkit.SeededBytes(bs, 1), []step{
			appendStep("append to a file of exactly one block", testkit.SeededBytes(10, 2)),
			appendStep("append to the new block", testkit.SeededBytes(20, 3)),
		}, -1},
		{"/one-byte", 2, []byte{7}, []step{
			appendStep("append to a file of one byte", []byte{8, 9}),
			appendStep("fill the block exactly", testkit.SeededBytes(bs-3, 4)),
			appendStep("append after the filled block", testkit.SeededBytes(5, 5)),
		}, 0},
		{"/cross", 2, testkit.SeededBytes(bs-100, 6), []step{
			appendStep("append crossing into the next block", testkit.SeededBytes(300, 7)),
			appendStep("append crossing two boundaries", testkit.SeededBytes(2*bs, 8)),
		}, 0},
		{"/zeros", 2, append(testkit.SeededBytes(30000, 9), make([]byte, 9000)...), []step{
			appendStep("zero-length append", nil),
			appendStep("append of zeros onto bytes ending in zeros", make([]byte, 5000)),
			appendStep("append ending in zeros", append(testkit.SeededBytes(100, 10), make([]byte, 4000)...)),
			appendStep("small append", []byte("x")),
			{"zero-length append at the end", func(tx *client.Txn, f *client.File, want []byte) ([]byte, error) {
				_, err := f.Write(nil)
				return want, err
			}},
		}, 0},
		{"/trunc-append", 2, testkit.SeededBytes(bs+40000, 11), []step{
			{"truncate down then append in one transaction", func(tx *client.Txn, f *client.File, want []byte) ([]byte, error) {
				if err := f.Truncate(int64(bs + 20000)); err != nil {
					return nil, err
				}
				add := testkit.SeededBytes(500, 12)
				_, err := f.WriteAt(add, int64(bs+20000))
				return append(want[:bs+20000:bs+20000], add...), err
			}},
			appendStep("append after it", testkit.SeededBytes(100, 13)),
			{"truncate down into the previous block then append", func(tx *client.Txn, f *client.File, want []byte) ([]byte, error) {
				if err := f.Truncate(1000); err != nil {
					return nil, err
				}
				add := testkit.SeededBytes(70000, 14)
				_, err := f.WriteAt(add, 1000)
				return append(want[:1000:1000], add...), err
			}},
			appendStep("append after it", testkit.SeededBytes(100, 15)),
		}, -1},
		{"/hole", 2, testkit.SeededBytes(20000, 16), []step{
			{"truncate up across blocks", func(tx *client.Txn, f *client.File, want []byte) ([]byte, error) {
				n := 3*bs + 500
				return append(want, make([]byte, n-len(want))...), f.Truncate(int64(n))
			}},
			appendStep("append onto the hole", testkit.SeededBytes(200, 17)),
			appendStep("append again", testkit.SeededBytes(200, 18)),
		}, -1},
		{"/flushes", 2, testkit.SeededBytes(25000, 19), []step{
			{"three flushed appends in one transaction, read back between", func(tx *client.Txn, f *client.File, want []byte) ([]byte, error) {
				for k := 0; k < 3; k++ {
					add := testkit.SeededBytes(3000, uint64(20+k))
					if _, err := f.WriteAt(add, f.Size()); err != nil {
						return nil, err
					}
					want = append(want, add...)
					if err := f.Flush(ctx); err != nil {
						return nil, err
					}
					got := make([]byte, len(want))
					if _, err := f.ReadAt(got, 0); err != nil {
						return nil, err
					}
					if !bytes.Equal(got, want) {
						return nil, fmt.Errorf("after flush %d the transaction reads: %s", k, x2Diff(got, want))
					}
				}
				return want, nil
			}},
		}, -1}, // the second flush copies on write: one extension per transaction
		{"/two-handles", 2, testkit.SeededBytes(25000, 23), []step{
			{"two handles: the second opened after the first's flush", func(tx *client.Txn, f *client.File, want []byte) ([]byte, error) {
				a := testkit.SeededBytes(400, 24)
				if _, err := f.WriteAt(a, f.Size()); err != nil {
					return nil, err
				}
				if err := f.Flush(ctx); err != nil {
					return nil, err
				}
				g, err := tx.Open(ctx, "/two-handles")
				if err != nil {
					return nil, err
				}
				if g.Size() != int64(len(want)+len(a)) {
					return nil, fmt.Errorf("second handle sees size %d, want %d", g.Size(), len(want)+len(a))
				}
				b := testkit.SeededBytes(600, 25)
				if _, err := g.WriteAt(b, g.Size()); err != nil {
					return nil, err
				}
				return append(append(want, a...), b...), nil
			}},
		}, -1},
		{"/rep1", 1, testkit.SeededBytes(33333, 28), []step{
			appendStep("append to a rep-1 file", testkit.SeededBytes(444, 29)),
			appendStep("append again", testkit.SeededBytes(64000, 30)),
		}, 0},
	}
	for _, tc := range cases {
		testkit.MustOK(t, "create "+tc.path, cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.CreateFile(ctx, tc.path, client.CreateOptions{Rep: tc.rep})
			if err != nil {
				return err
			}
			_, err = f.Write(tc.base)
			return err
		}))
		want := bytes.Clone(tc.base)
		for i, st := range tc.steps {
			hold(tc.path, want)
			var check func()
			if i == 0 && tc.inPlace >= 0 {
				check = inPlace(tc.path, uint64(tc.inPlace))
			}
			var next []byte
			testkit.MustOK(t, tc.path+": "+st.what, cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
				f, err := tx.Open(ctx, tc.path)
				if err != nil {
					return err
				}
				next, err = st.do(tx, f, bytes.Clone(want))
				return err
			}))
			want = next
			x2Check(t, tc.path+": "+st.what, tc.path, want, cl, tcp)
			if check != nil {
				check()
			}
			for k, o := range olds {
				if err := o.reread(k); err != nil {
					t.Errorf("%s: after %q, reader %d: %v", tc.path, st.what, k, err)
				}
			}
		}
	}
	if p := fsckProblems(t, cl); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}

// x2Line is one line of the FUSE test's log: writer, sequence number, a
// hex payload and the CRC32 of the rest.
func x2Line(w, seq, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = "0123456789abcdef"[(w*7+seq*13+i)%16]
	}
	body := fmt.Sprintf("w%d s%d %s", w, seq, p)
	return []byte(fmt.Sprintf("%s %08x\n", body, crc32.ChecksumIEEE([]byte(body))))
}

// x2ParseLine checks one line (without its newline).
func x2ParseLine(l string) (x2ID, bool) {
	i := strings.LastIndexByte(l, ' ')
	if i < 0 || fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(l[:i]))) != l[i+1:] {
		return x2ID{}, false
	}
	var id x2ID
	if _, err := fmt.Sscanf(l[:i], "w%d s%d", &id.w, &id.seq); err != nil {
		return x2ID{}, false
	}
	return id, true
}

// x2ParseLines checks that data is whole, intact lines (the first may be
// cut when partial is set: a tail of the file).
func x2ParseLines(data []byte, partial bool) ([]x2ID, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if data[len(data)-1] != '\n' {
		return nil, fmt.Errorf("%d bytes that do not end with a whole line: ...%q", len(data), data[max(0, len(data)-40):])
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	if partial {
		lines = lines[1:]
	}
	var out []x2ID
	for _, l := range lines {
		id, ok := x2ParseLine(l)
		if !ok {
			return out, fmt.Errorf("a damaged line (%d bytes): %.60q", len(l), l)
		}
		out = append(out, id)
	}
	return out, nil
}

// TestExtend2FUSEChild is the appender process of TestExtend2FUSEAppends
// (the test binary run again); it does nothing in a normal run.
func TestExtend2FUSEChild(t *testing.T) {
	path := os.Getenv("X2_CHILD_FILE")
	if path == "" {
		t.Skip("the appender process of TestExtend2FUSEAppends")
	}
	w, _ := strconv.Atoi(os.Getenv("X2_CHILD_ID"))
	n, _ := strconv.Atoi(os.Getenv("X2_CHILD_LINES"))
	for seq := 0; seq < n; seq++ {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(x2Line(w, seq, 1+(seq*37)%300)); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		fmt.Printf("x2ok %d\n", seq)
	}
}

// TestExtend2FUSEAppends: through one FUSE mount (rep 2), three goroutines
// and two processes append lines with O_APPEND, each line fsynced; one
// process is killed with SIGKILL after a few of its lines. Meanwhile
// readers read the file's tail through this mount and through a second one
// as 'tail -c' does (the real command, and seek-to-end reads). Every tail
// must be the bytes
// the file holds at that offset at the end (the file only grows: every
// committed version is a prefix of the last; a tail may end inside a line
// when a version was committed while a write was arriving in pieces). At
// the end the file, read through the mount and through the client
// library, holds every fsynced line exactly once and nothing but whole
// lines; fsck is clean. (Until 5efad75, tail readers in the writing mount
// read wrong bytes, before this feature too:
// TestExtend2FUSEWriterMountReadsWrongBytes.)
func TestExtend2FUSEAppends(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c, "rep=2")
	m2 := testkit.StartMount(t, c, "ttl=0")
	ctx := context.Background()
	path := m.Path("log")
	base := bytes.Repeat(x2Line(9, 0, 200), 180) // about 40 KB of whole lines
	testkit.MustOK(t, "create", os.WriteFile(path, base, 0o644))

	var mu sync.Mutex
	acked := map[x2ID]bool{}
	errs := make(chan error, 100)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; seq < 40; seq++ {
				n := 1 + (seq*53+w*11)%400
				if seq%13 == 7 {
					n = 30000
				}
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
				if err == nil {
					_, err = f.Write(x2Line(w, seq, n))
					if err == nil {
						err = f.Sync()
					}
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
				if err != nil {
					errs <- fmt.Errorf("appender %d line %d: %w", w, seq, err)
					return
				}
				mu.Lock()
				acked[x2ID{w, seq}] = true
				mu.Unlock()
			}
		}()
	}
	// Two appender processes; the second is killed after 5 lines.
	child := func(w, lines int) (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestExtend2FUSEChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "X2_CHILD_FILE="+path, fmt.Sprintf("X2_CHILD_ID=%d", w), fmt.Sprintf("X2_CHILD_LINES=%d", lines))
		out, err := cmd.StdoutPipe()
		testkit.MustOK(t, "child pipe", err)
		cmd.Stderr = os.Stderr
		testkit.MustOK(t, "start child", cmd.Start())
		return cmd, bufio.NewScanner(out)
	}
	for _, ch := range []struct{ w, lines, kill int }{{5, 40, -1}, {6, 1000, 5}} {
		cmd, sc := child(ch.w, ch.lines)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := 0
			for sc.Scan() {
				var seq int
				if _, err := fmt.Sscanf(sc.Text(), "x2ok %d", &seq); err != nil {
					continue
				}
				mu.Lock()
				acked[x2ID{ch.w, seq}] = true
				mu.Unlock()
				got++
				if got == ch.kill {
					cmd.Process.Kill()
				}
			}
			err := cmd.Wait()
			if ch.kill < 0 && err != nil {
				errs <- fmt.Errorf("appender process %d: %v", ch.w, err)
			}
			if got < min(ch.lines, max(ch.kill, 0)) {
				errs <- fmt.Errorf("appender process %d acknowledged %d lines", ch.w, got)
			}
		}()
	}
	// Tail readers until the appenders are done. A tail that is not whole
	// lines is kept and compared with the final file at the end.
	type badTail struct {
		how  string
		off  int64 // -1: tail(1), the offset is not known
		data []byte
		err  error
	}
	var bad []badTail
	var stop atomic.Bool
	var rwg sync.WaitGroup
	tails := 0
	for _, mp := range []*testkit.Mount{m, m2} {
		p := mp.Path("log")
		rwg.Add(2)
		go func() {
			defer rwg.Done()
			for i := 0; !stop.Load() || i < 2; i++ {
				out, err := exec.Command("tail", "-c", strconv.Itoa(300+i%5*9000), p).Output()
				if err != nil {
					errs <- fmt.Errorf("tail -c %s: %v", p, err)
					return
				}
				if _, err := x2ParseLines(out, true); err != nil {
					mu.Lock()
					bad = append(bad, badTail{"tail -c of " + p, -1, out, err})
					mu.Unlock()
				}
			}
		}()
		go func() {
			defer rwg.Done()
			for i := 0; !stop.Load() || i < 2; i++ {
				f, err := os.Open(p)
				if err != nil {
					errs <- err
					return
				}
				st, err := f.Stat()
				if err == nil {
					off := max(0, st.Size()-int64(500+i%7*5000))
					buf := make([]byte, st.Size()-off)
					var n int
					n, err = f.ReadAt(buf, off)
					if err == io.EOF {
						err = nil
					}
					if err == nil {
						if _, perr := x2ParseLines(buf[:n], off > 0); perr != nil {
							mu.Lock()
							bad = append(bad, badTail{fmt.Sprintf("seek-to-end read of %s (size %d, %d bytes read)", p, st.Size(), n), off, buf[:n], perr})
							mu.Unlock()
						}
					}
				}
				f.Close()
				if err != nil {
					errs <- fmt.Errorf("seek-to-end read of %s: %v", p, err)
					return
				}
				mu.Lock()
				tails++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	viaMount, err := os.ReadFile(path)
	testkit.MustOK(t, "read through the mount", err)
	viaClient, err := x2Read(ctx, cl, "/log")
	testkit.MustOK(t, "read through the client", err)
	if !bytes.Equal(viaMount, viaClient) {
		t.Fatalf("the mount and the client read the log differently: %s", x2Diff(viaMount, viaClient))
	}
	if !bytes.HasPrefix(viaClient, base) {
		t.Fatalf("the log lost its first bytes: %s", x2Diff(viaClient[:min(len(viaClient), len(base))], base))
	}
	ids, err := x2ParseLines(viaClient[len(base):], false)
	if err != nil {
		t.Fatalf("the log: %v", err)
	}
	partial, zeros := 0, 0
	for _, b := range bad {
		off := b.off
		if off < 0 {
			off = int64(bytes.Index(viaClient, b.data))
		}
		if nz := bytes.TrimRight(b.data, "\x00"); len(nz) < len(b.data) {
			o := b.off
			if o < 0 {
				o = int64(bytes.Index(viaClient, nz))
			}
			if o >= 0 && o+int64(len(nz)) <= int64(len(viaClient)) && bytes.Equal(viaClient[o:o+int64(len(nz))], nz) {
				// Zeros past the end of an older version: the mount's
				// size (getattr) was newer than the version its shared
				// read transaction serves, and the kernel filled the
				// short read with zeros. Seen before this feature too
				// (6a2f11d); not about extension. Logged.
				zeros++
				continue
			}
		}
		switch {
		case off >= 0 && off+int64(len(b.data)) <= int64(len(viaClient)) && bytes.Equal(viaClient[off:off+int64(len(b.data))], b.data):
			// A committed version that ends inside a line: a close (FLUSH)
			// of another descriptor committed while a write(2) was still
			// arriving in pieces. Not about extension; logged.
			partial++
		case off >= 0:
			t.Errorf("%s: %v; at %d the final file differs: %s", b.how, b.err, off, x2Diff(b.data, viaClient[off:min(int64(len(viaClient)), off+int64(len(b.data)))]))
		default:
			t.Errorf("%s: %v; these bytes are nowhere in the final file", b.how, b.err)
		}
	}
	count := map[x2ID]int{}
	for _, id := range ids {
		count[id]++
	}
	for id, n := range count {
		if n > 1 {
			t.Errorf("line %v is there %d times", id, n)
		}
	}
	for id := range acked {
		if count[id] != 1 {
			t.Errorf("fsynced line %v is there %d times", id, count[id])
		}
	}
	t.Logf("%d lines, %d fsynced, %d tail reads, %d of them ending inside a line (a prefix of the final file), %d ending in zeros past an older version", len(ids), len(acked), tails, partial, zeros)
	if p := fsckProblems(t, cl); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}

// TestExtend2FUSEWriterMountReadsWrongBytes: one process appends lines
// with O_APPEND through a FUSE mount (each line fsynced and closed) while
// another reads the file's tail through the same mount. Every tail read
// must be the bytes the file holds at that offset at the end (the file
// only grows by appends, so every state is a prefix of the last), and the
// size a stat shows must never go back.
//
// Failed before 5efad75, also before extension in place (6a2f11d): a stat
// racing a commit cached the size from before it, the file seemed to
// shrink, and tail reads returned bytes the file never held there.
func TestExtend2FUSEWriterMountReadsWrongBytes(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)
	path := m.Path("log")
	testkit.MustOK(t, "create", os.WriteFile(path, x2Line(9, 0, 100), 0o644))
	type read struct {
		off  int64
		data []byte
	}
	var reads []read
	done := make(chan error, 1)
	go func() {
		for seq := 0; seq < 120; seq++ {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				done <- err
				return
			}
			_, err = f.Write(x2Line(1, seq, 1+(seq*733)%9000))
			if err == nil {
				err = f.Sync()
			}
			f.Close()
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var werr error
	var lastSize int64
	shrank := 0
	for running := true; running; {
		select {
		case werr = <-done:
			running = false
		default:
		}
		f, err := os.Open(path)
		testkit.MustOK(t, "open", err)
		st, err := f.Stat()
		testkit.MustOK(t, "stat", err)
		if st.Size() < lastSize {
			if shrank == 0 {
				t.Logf("the size of the append-only file went back from %d to %d", lastSize, st.Size())
			}
			shrank++
		}
		lastSize = st.Size()
		off := max(0, st.Size()-3000)
		buf := make([]byte, st.Size()-off)
		n, err := f.ReadAt(buf, off)
		f.Close()
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		reads = append(reads, read{off, buf[:n]})
	}
	testkit.MustOK(t, "append", werr)
	final, err := os.ReadFile(path)
	testkit.MustOK(t, "read", err)
	if _, err := x2ParseLines(final, false); err != nil {
		t.Fatalf("the file: %v", err)
	}
	wrong := 0
	for _, r := range reads {
		end := r.off + int64(len(r.data))
		if end > int64(len(final)) || !bytes.Equal(final[r.off:end], r.data) {
			if wrong < 3 {
				t.Errorf("a read of %d bytes at %d returned bytes the file never held there: %s", len(r.data), r.off, x2Diff(r.data, final[r.off:min(end, int64(len(final)))]))
			}
			wrong++
		}
	}
	if wrong > 0 || shrank > 0 {
		t.Errorf("%d of %d tail reads were wrong; the size seen went back %d times", wrong, len(reads), shrank)
	}
}

// TestExtend2StaleAppendTicket: mallory, who may write a file, takes
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
func TestExtend2StaleAppendTicket(t *testing.T) {
	for _, mode := range []string{"datanodes restart", "namenode restarts"} {
		t.Run(strings.ReplaceAll(mode, " ", "-"), func(t *testing.T) { x2StaleAppendTicket(t, mode) })
	}
}

func x2StaleAppendTicket(t *testing.T, mode string) {
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
		err := x2Append(ctx, bob, "/m/f", add)
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
	x2Check(t, "bob's append", "/m/f", v2, admin)

	// Mallory reads bob's version and replays her old ticket on it.
	seen, err := x2Read(ctx, mallory, "/m/f")
	for attempt := 0; err != nil && attempt < 2; attempt++ {
		seen, err = x2Read(ctx, mallory, "/m/f")
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
		got, err := x2Read(ctx, cl, "/m/f")
		if err != nil {
			t.Errorf("%s: client %d: bob's acknowledged version no longer reads: %v", mode, i, err)
		} else if !bytes.Equal(got, v2) {
			t.Errorf("%s: client %d: bob's acknowledged version reads wrongly: %s", mode, i, x2Diff(got, v2))
		}
	}
	if p := fsckProblems(t, admin); len(p) > 0 {
		t.Errorf("fsck: %q", p)
	}
}

// TestExtend2BareSizeGrowAfterAbandonedExtension: a writer's extension of
// a file's partly filled last block reaches both replicas and the writer
// vanishes (its bytes stay past the committed length). Then a bare size
// change on the namenode (OpSetAttr with a size, what any writer may send)
// tries to grow the file past that block: the namenode refuses it (the
// block must be written, as client.File does), and the file's committed
// bytes still read; growing it through the library reads zeros after
// them; fsck is clean. (It failed before the namenode refused: the block,
// now whole, was read against its committed checksum with the vanished
// writer's bytes in it, unreadable on every replica.)
func TestExtend2BareSizeGrowAfterAbandonedExtension(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	v1 := testkit.SeededBytes(40000, 1)
	testkit.WriteRep2(t, cl, "/g", v1)
	w := c.Client(client.Config{})
	x2Flushed(t, ctx, w, "/g", bytes.Repeat([]byte{0xA5}, 5000))
	w.Close()
	fi, err := cl.Lookup(ctx, "/g")
	testkit.MustOK(t, "lookup", err)
	conn := testkit.RawAs(t, c, c.AdminCred)
	r, err := conn.Call(ctx, &wire.Request{Op: wire.OpSetAttr, Txn: 1, Flags: wire.FlagBegin | wire.FlagSize, Ino: fi.Ino, Size: 200000})
	if err != nil || r.Code != wire.ErrCodeInvalid {
		t.Fatalf("bare size change growing past the partly filled last block: %v %+v, want refused", err, r)
	}
	conn.Call(ctx, &wire.Request{Op: wire.OpAbort, Txn: 1})
	if got, err := x2Read(ctx, cl, "/g"); err != nil || !bytes.Equal(got, v1) {
		t.Fatalf("after the refused size change: %v", err)
	}
	n := int64(200000)
	_, err = cl.Auto(client.Durable).SetAttr(ctx, fi.Ino, client.SetAttr{Size: &n})
	testkit.MustOK(t, "grow through the library", err)
	want := append(bytes.Clone(v1), make([]byte, 200000-len(v1))...)
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	for i, rc := range []*client.Client{cl, tcp} {
		got, err := x2Read(ctx, rc, "/g")
		if err != nil {
			t.Errorf("client %d: the grown file does not read: %v", i, err)
		} else if !bytes.Equal(got, want) {
			t.Errorf("client %d: the grown file reads wrongly: %s", i, x2Diff(got, want))
		}
	}
	if p := fsckProblems(t, cl); len(p) > 0 {
		t.Errorf("fsck: %q", p)
	}
}

// TestExtend2AppendAfterTrailingZeros: an append whose bytes end in more
// than a page of zeros (a record padded with zeros), committed, then small
// appends. All must extend the last block in place, as appends of other
// bytes do.
//
// FAILS (performance, not data): the client does not send an extension's
// trailing zeros (client/extend.go: "Trailing zeros need not travel"), so
// the datanode's block holds fewer bytes on disk than the committed
// length; since b6d8f29 the datanode refuses to extend a block past what
// is on disk ("never past what is on disk ... copied instead"). So every
// append after one that ended in zeros costs an OpExtend and a refused
// DataExtend and then copies the whole block: a workload of zero-padded
// records gets no extension in place at all and more round trips than
// before the feature.
func TestExtend2AppendAfterTrailingZeros(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	v := testkit.SeededBytes(30000, 1)
	testkit.WriteRep2(t, cl, "/z", v)
	first := blocksOf(t, cl, "/z")[0]
	for i, add := range [][]byte{
		testkit.SeededBytes(100, 2),
		append(testkit.SeededBytes(100, 3), make([]byte, 9000)...), // ends in zeros (more than a page)
		testkit.SeededBytes(10, 4),
		testkit.SeededBytes(10, 5),
	} {
		testkit.MustOK(t, "append", x2Append(ctx, cl, "/z", add))
		v = append(v, add...)
		x2Check(t, "append", "/z", v, cl)
		if now := blocksOf(t, cl, "/z")[0]; now != first {
			t.Errorf("append %d (%d bytes, last byte %d) copied the block (%s → %s) instead of extending it", i, len(add), add[len(add)-1], first, now)
			first = now
		}
	}
}

// TestExtend2TransientLockConflictCopiesBlock: appends by several clients
// to one file. A writer whose view went stale (another append committed
// after it opened the file) flushes its append: the namenode refuses it
// (first committer wins) but it holds the file's lock until it ends. A
// current writer's append meets that lock in OpExtend; the doomed writer
// then ends, and the current writer's transaction goes on. Its append must
// extend the block in place, or its transaction fail with a conflict (and
// be retried); it must not copy the block because a lock was held for a
// moment.
//
// FAILS (performance, not data): the client treats every refusal of
// OpExtend, a lock conflict included, as "copy on write instead"
// (client/extend.go extendBlock), reads the committed bytes and allocates;
// by then the lock is free, so the transaction copies the whole block and
// commits. Under concurrent appenders this happens by itself (it made
// TestExtend2ConcurrentAppendersAndOldReaders see block 0 copied in most
// runs); here the datanodes are frozen while the fallback reads the
// committed bytes, so the lock is released in between every time.
func TestExtend2TransientLockConflictCopiesBlock(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	v := testkit.SeededBytes(40000, 1)
	testkit.WriteRep2(t, cl, "/f", v)

	// The doomed writer: opened before another append committed.
	stale := c.Client(client.Config{})
	defer stale.Close()
	txC, _ := stale.Begin(ctx)
	fC, err := txC.Open(ctx, "/f")
	testkit.MustOK(t, "open (stale)", err)
	add := testkit.SeededBytes(500, 2)
	testkit.MustOK(t, "append", x2Append(ctx, cl, "/f", add))
	v = append(v, add...)
	first := blocksOf(t, cl, "/f")[0]
	_, err = fC.WriteAt([]byte("stale"), fC.Size())
	testkit.MustOK(t, "stale write", err)
	if err := fC.Flush(ctx); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("the stale writer's flush: %v, want a conflict", err)
	}

	// The current writer, reading through the datanodes (frozen below).
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	txT, _ := tcp.Begin(ctx)
	fT, err := txT.Open(ctx, "/f")
	testkit.MustOK(t, "open", err)
	add = testkit.SeededBytes(300, 3)
	_, err = fT.WriteAt(add, fT.Size())
	testkit.MustOK(t, "append", err)
	extends := func() uint64 {
		st, err := cl.NamenodeStats(ctx)
		testkit.MustOK(t, "stats", err)
		return st.PerOp["extend"]
	}
	before := extends()
	var pids []int
	for _, p := range c.DNs {
		pids = append(pids, testkit.DatanodePid(t, p))
		c.Stop(p)
	}
	done := make(chan error, 1)
	go func() { done <- fT.Flush(ctx) }()
	for extends() == before {
		// until the namenode answered the current writer's OpExtend
	}
	testkit.MustOK(t, "abort the stale writer", txC.Abort(ctx))
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGCONT)
	}
	ferr := <-done
	if ferr != nil {
		txT.Abort(ctx)
		if !errors.Is(ferr, client.ErrConflict) {
			t.Fatalf("the current writer's flush: %v", ferr)
		}
		t.Logf("the current writer's flush failed with a conflict (it would be retried): %v", ferr)
		return
	}
	testkit.MustOK(t, "commit", txT.Commit(ctx))
	v = append(v, add...)
	x2Check(t, "after the append", "/f", v, cl, tcp)
	if now := blocksOf(t, cl, "/f")[0]; now != first {
		t.Errorf("the append copied the block (%s → %s) because a doomed transaction held the file's lock when it asked to extend", first, now)
	}
}
