package kv_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/kv"
)

const testBS = 64 << 10 // the in-process cluster's blocksize

// newDB starts a cluster, creates a database and opens it.
func newDB(t *testing.T, co kv.CreateOptions, o kv.Options) (*client.Client, *kv.DB) {
	t.Helper()
	return newDBIn(t, clustertest.StartInProcess(t, clustertest.Options{}), co, o)
}

func newDBIn(t *testing.T, cl *clustertest.InProcess, co kv.CreateOptions, o kv.Options) (*client.Client, *kv.DB) {
	t.Helper()
	c := cl.Client(t)
	ctx := context.Background()
	if err := kv.Create(ctx, c, "/db", co); err != nil {
		t.Fatal(err)
	}
	db, err := kv.Open(ctx, c, "/db", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return c, db
}

// model is what the database should hold.
type model map[string][]byte

func (m model) keys() []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// verify checks a snapshot against m: every key by Get, and a full scan.
func verify(t *testing.T, s *kv.Snapshot, m model) {
	t.Helper()
	if s.Len() != int64(len(m)) {
		t.Fatalf("version %d: %d keys, want %d", s.Version(), s.Len(), len(m))
	}
	for k, v := range m {
		got, err := s.Get([]byte(k))
		if err != nil {
			t.Fatalf("version %d: get %q: %v", s.Version(), k, err)
		}
		if !bytes.Equal(got, v) {
			t.Fatalf("version %d: get %q: %d bytes, want %d", s.Version(), k, len(got), len(v))
		}
	}
	it := s.Scan(kv.Range{})
	defer it.Close()
	want := m.keys()
	i := 0
	for it.Next() {
		if i >= len(want) || string(it.Key()) != want[i] {
			t.Fatalf("version %d: scan key %d is %q, want %q", s.Version(), i, it.Key(), want[min(i, len(want)-1)])
		}
		if it.Size() != int64(len(m[want[i]])) {
			t.Fatalf("scan %q: size %d, want %d", it.Key(), it.Size(), len(m[want[i]]))
		}
		i++
	}
	if err := it.Err(); err != nil || i != len(want) {
		t.Fatalf("scan: %d keys, want %d (%v)", i, len(want), err)
	}
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestPutGetDelete(t *testing.T) {
	ctx := context.Background()
	_, db := newDB(t, kv.CreateOptions{}, kv.Options{})
	if db.Stats().Version != 1 || db.Stats().Keys != 0 {
		t.Fatalf("new database: %+v", db.Stats())
	}
	if _, err := db.Get([]byte("a")); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get from empty: %v", err)
	}
	w, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789"), 3000)
	w.Put([]byte("a"), []byte("small"))
	w.Put([]byte("b"), big)
	w.Put([]byte("c"), nil)
	w.Put([]byte("a"), []byte("replaced in the batch"))
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	verify(t, db.Snapshot(), model{"a": []byte("replaced in the batch"), "b": big, "c": {}})
	w, _ = db.Begin(ctx)
	w.Delete([]byte("b"))
	w.Delete([]byte("never there"))
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	s := db.Snapshot()
	defer s.Release()
	verify(t, s, model{"a": []byte("replaced in the batch"), "c": {}})
	if s.Version() != 3 {
		t.Fatalf("version %d after two commits", s.Version())
	}
}

// TestRandomBatchesAgainstModel: random batches of inserts, replacements
// and deletes (binary keys, values from empty to several blocks), each
// committed and checked against a model, through the same DB and through
// a freshly opened one (cold cache); small TailCommits so that the tail
// is compacted often; a vacuum now and then.
func TestRandomBatchesAgainstModel(t *testing.T) {
	ctx := context.Background()
	c, db := newDB(t, kv.CreateOptions{MaxKeyLength: 40}, kv.Options{TailCommits: 3, CacheBytes: 8 << 20})
	r := rand.New(rand.NewPCG(1, 2))
	m := model{}
	var keys []string
	compactions := 0
	for round := 0; round < 60; round++ {
		w, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + r.IntN(30)
		if round%10 == 5 {
			n = 600 // a large batch
		}
		for i := 0; i < n; i++ {
			switch op := r.IntN(10); {
			case op < 2 && len(keys) > 0:
				k := keys[r.IntN(len(keys))]
				w.Delete([]byte(k))
				delete(m, k)
			default:
				var k string
				if op < 5 && len(keys) > 0 {
					k = keys[r.IntN(len(keys))]
				} else {
					k = string(randBytes(r, r.IntN(41)))
					keys = append(keys, k)
				}
				var v []byte
				switch s := r.IntN(100); {
				case s < 40:
					v = randBytes(r, r.IntN(70))
				case s < 97:
					v = randBytes(r, r.IntN(5000))
				default:
					v = randBytes(r, r.IntN(3*testBS))
				}
				if err := w.Put([]byte(k), v); err != nil {
					t.Fatal(err)
				}
				m[k] = v
			}
		}
		st, err := w.CommitStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Compacted {
			compactions++
		}
		s := db.Snapshot()
		verify(t, s, m)
		s.Release()
		if round%7 == 6 {
			db2, err := kv.Open(ctx, c, "/db", kv.Options{})
			if err != nil {
				t.Fatal(err)
			}
			s := db2.Snapshot()
			verify(t, s, m)
			s.Release()
			db2.Close()
		}
		if round%20 == 19 {
			if _, err := db.Vacuum(ctx, kv.VacuumOptions{}); err != nil {
				t.Fatal(err)
			}
			st := db.Stats()
			if st.Garbage != 0 {
				t.Fatalf("after vacuum: %+v", st)
			}
			s := db.Snapshot()
			verify(t, s, m)
			s.Release()
		}
	}
	if compactions < 10 {
		t.Fatalf("only %d compactions in 60 commits with TailCommits 3", compactions)
	}
}

// TestReaderSeesWholeVersions: while a writer commits many versions, each
// rewriting every key with the version's number (and adding or removing
// a key), readers refreshing in a loop always find every key of one
// version, and a snapshot taken at the start still reads its version at
// the end, after compactions rewrote the tail it was reading.
func TestReaderSeesWholeVersions(t *testing.T) {
	ctx := context.Background()
	c, db := newDB(t, kv.CreateOptions{}, kv.Options{TailCommits: 4})
	const nkeys = 20
	const versions = 40
	val := func(ver uint64, k int) []byte {
		return []byte(fmt.Sprintf("%08d/%02d/", ver, k) + string(bytes.Repeat([]byte{byte(ver)}, 100+int(ver)*37%3000)))
	}
	w, _ := db.Begin(ctx)
	for k := 0; k < nkeys; k++ {
		w.Put([]byte(fmt.Sprintf("key%02d", k)), val(2, k))
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	first := db.Snapshot()
	defer first.Release()
	check := func(s *kv.Snapshot) error {
		ver := s.Version()
		n := s.Len()
		if n != nkeys+int64(ver%2) {
			return fmt.Errorf("version %d: %d keys", ver, n)
		}
		for k := 0; k < nkeys; k++ {
			got, err := s.Get([]byte(fmt.Sprintf("key%02d", k)))
			if err != nil {
				return fmt.Errorf("version %d key %d: %v", ver, k, err)
			}
			if !bytes.Equal(got, val(ver, k)) {
				return fmt.Errorf("version %d key %d: value of version %.8s", ver, k, got)
			}
		}
		return nil
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	var reads atomic.Int64
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdb, err := kv.Open(ctx, c, "/db", kv.Options{CacheBytes: 256 << 10})
			if err != nil {
				errs <- err
				return
			}
			defer rdb.Close()
			for !stop.Load() {
				if err := rdb.Refresh(ctx); err != nil {
					errs <- err
					return
				}
				s := rdb.Snapshot()
				err := check(s)
				s.Release()
				if err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		}()
	}
	for ver := uint64(3); ver <= versions; ver++ {
		w, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < nkeys; k++ {
			w.Put([]byte(fmt.Sprintf("key%02d", k)), val(ver, k))
		}
		if ver%2 == 1 {
			w.Put([]byte("odd"), []byte("present in odd versions"))
		} else {
			w.Delete([]byte("odd"))
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := check(first); err != nil {
		t.Fatalf("the first snapshot after %d commits: %v", versions, err)
	}
	if db.Stats().Compactions == 0 {
		t.Fatal("no compaction happened")
	}
	t.Logf("%d whole-version reads during %d commits", reads.Load(), versions-2)
}

// TestSecondWriterConflict: a second writer, from another client, gets
// ErrLocked (and client.ErrConflict) at once; so does a vacuum; after
// the first commits, the second may write.
func TestSecondWriterConflict(t *testing.T) {
	ctx := context.Background()
	cl := clustertest.StartInProcess(t, clustertest.Options{})
	_, db := newDBIn(t, cl, kv.CreateOptions{}, kv.Options{})
	c2 := cl.Client(t)
	db2, err := kv.Open(ctx, c2, "/db", kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	w, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Put([]byte("k"), []byte("first"))
	if _, err := db2.Begin(ctx); !errors.Is(err, kv.ErrLocked) || !errors.Is(err, client.ErrConflict) {
		t.Fatalf("second writer: %v", err)
	}
	if _, err := db2.Vacuum(ctx, kv.VacuumOptions{}); !errors.Is(err, kv.ErrLocked) {
		t.Fatalf("vacuum during a write: %v", err)
	}
	if _, err := db.Begin(ctx); !errors.Is(err, kv.ErrLocked) {
		t.Fatalf("second writer on the same DB: %v", err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	w2, err := db2.Begin(ctx)
	if err != nil {
		t.Fatalf("after the commit: %v", err)
	}
	if got, _ := w2.Snapshot().Get([]byte("k")); string(got) != "first" {
		t.Fatalf("second writer builds on %q", got)
	}
	w2.Put([]byte("k"), []byte("second"))
	if err := w2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	db.Refresh(ctx)
	if got, _ := db.Get([]byte("k")); string(got) != "second" {
		t.Fatalf("got %q", got)
	}
	// An aborted writer releases the lock too.
	w3, _ := db.Begin(ctx)
	w3.Abort(ctx)
	w4, err := db2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w4.Abort(ctx)
}

// TestIterationOrderAndRanges: binary keys with every byte value, scanned
// in byte order, by prefix and by inclusive ranges; Count agrees with the
// scans.
func TestIterationOrderAndRanges(t *testing.T) {
	ctx := context.Background()
	_, db := newDB(t, kv.CreateOptions{MaxKeyLength: 8}, kv.Options{})
	r := rand.New(rand.NewPCG(3, 4))
	set := map[string]bool{"": true}
	for b := 0; b < 256; b++ {
		set[string([]byte{byte(b)})] = true
		set[string([]byte{byte(b), 0})] = true
		set[string([]byte{0xff, byte(b)})] = true
	}
	for len(set) < 5000 {
		set[string(randBytes(r, 1+r.IntN(8)))] = true
	}
	var keys []string
	for k := range set {
		keys = append(keys, k)
	}
	// Two batches, so the tree is built by merging too.
	for half := 0; half < 2; half++ {
		w, _ := db.Begin(ctx)
		for i, k := range keys {
			if i%2 == half {
				if err := w.Put([]byte(k), []byte(fmt.Sprint(len(k)))); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(keys)
	scan := func(rg kv.Range) []string {
		it := db.Scan(rg)
		defer it.Close()
		var out []string
		for it.Next() {
			out = append(out, string(it.Key()))
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		return out
	}
	if got := scan(kv.Range{}); !slices.Equal(got, keys) {
		t.Fatalf("full scan: %d keys, want %d, order differs", len(got), len(keys))
	}
	pick := func() []byte {
		if r.IntN(3) == 0 {
			return randBytes(r, r.IntN(3))
		}
		return []byte(keys[r.IntN(len(keys))])
	}
	for i := 0; i < 300; i++ {
		var rg kv.Range
		switch i % 4 {
		case 0:
			rg.Prefix = pick()
		case 1:
			rg.From, rg.To = pick(), pick()
		case 2:
			rg.From = pick()
		case 3:
			rg.Prefix, rg.From, rg.To = pick()[:0], pick(), pick()
			if r.IntN(2) == 0 {
				rg.Prefix = []byte{0xff}
			}
		}
		var want []string
		for _, k := range keys {
			if (rg.Prefix == nil || bytes.HasPrefix([]byte(k), rg.Prefix)) &&
				(rg.From == nil || k >= string(rg.From)) && (rg.To == nil || k <= string(rg.To)) {
				want = append(want, k)
			}
		}
		if got := scan(rg); !slices.Equal(got, want) {
			t.Fatalf("range %+v: %d keys, want %d", rg, len(got), len(want))
		}
		if n, err := db.Count(rg); err != nil || n != int64(len(want)) {
			t.Fatalf("count %+v: %d (%v), want %d", rg, n, err, len(want))
		}
	}
}

// genReader yields n deterministic pseudo-random bytes without holding
// them.
type genReader struct {
	r *rand.ChaCha8
	n int64
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), g.n)]
	g.r.Read(p)
	g.n -= int64(len(p))
	return len(p), nil
}

// TestLargeValueStreamed: a value of many blocks is written from a
// stream and read back streamed (WriteTo), by ReadAt at odd offsets and
// whole; values around the inline limit and the block size round-trip.
func TestLargeValueStreamed(t *testing.T) {
	ctx := context.Background()
	_, db := newDB(t, kv.CreateOptions{}, kv.Options{CacheBytes: 1 << 20})
	const size = 40*testBS + 12345
	seed := [32]byte{7}
	w, _ := db.Begin(ctx)
	if err := w.Put([]byte("before"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.PutReader([]byte("big"), &genReader{rand.NewChaCha8(seed), size}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{63, 64, 65, testBS - 1, testBS, testBS + 1} {
		w.Put([]byte(fmt.Sprint("edge", n)), bytes.Repeat([]byte{byte(n)}, n))
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := sha256.New()
	io.Copy(want, &genReader{rand.NewChaCha8(seed), size})
	v, err := db.Lookup([]byte("big"))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.Size() != size {
		t.Fatalf("size %d", v.Size())
	}
	h := sha256.New()
	if n, err := v.WriteTo(h); err != nil || n != size {
		t.Fatalf("WriteTo: %d, %v", n, err)
	}
	if !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
		t.Fatal("streamed value differs")
	}
	all := make([]byte, size)
	io.ReadFull(&genReader{rand.NewChaCha8(seed), size}, all)
	for _, off := range []int64{0, 1, testBS - 3, 17*testBS + 5, size - 10} {
		p := make([]byte, 3*testBS)
		n, err := v.ReadAt(p, off)
		if int64(n) != min(int64(len(p)), size-off) || (err != nil && err != io.EOF) || !bytes.Equal(p[:n], all[off:off+int64(n)]) {
			t.Fatalf("ReadAt %d: %d %v", off, n, err)
		}
	}
	if got, err := db.Get([]byte("big")); err != nil || !bytes.Equal(got, all) {
		t.Fatalf("Get big: %v", err)
	}
	for _, n := range []int{63, 64, 65, testBS - 1, testBS, testBS + 1} {
		got, err := db.Get([]byte(fmt.Sprint("edge", n)))
		if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte(n)}, n)) {
			t.Fatalf("edge %d: %d bytes, %v", n, len(got), err)
		}
	}
	// Read through io.Copy (Read, not WriteTo), which checks the CRC too.
	v2, _ := db.Lookup([]byte("big"))
	h.Reset()
	if _, err := io.Copy(h, struct{ io.Reader }{v2}); err != nil || !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
		t.Fatalf("read: %v", err)
	}
	v2.Close()
}

// TestKeyLimits: a key at the limit is accepted, one over it refused;
// empty keys and values work.
func TestKeyLimits(t *testing.T) {
	ctx := context.Background()
	_, db := newDB(t, kv.CreateOptions{MaxKeyLength: 16}, kv.Options{})
	w, _ := db.Begin(ctx)
	if err := w.Put(bytes.Repeat([]byte("k"), 16), []byte("at the limit")); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(bytes.Repeat([]byte("k"), 17), []byte("over")); !errors.Is(err, kv.ErrKeyTooLong) {
		t.Fatalf("key over the limit: %v", err)
	}
	if err := w.Delete(bytes.Repeat([]byte("k"), 17)); !errors.Is(err, kv.ErrKeyTooLong) {
		t.Fatalf("delete of a key over the limit: %v", err)
	}
	if err := w.Put(nil, []byte("empty key")); err != nil {
		t.Fatal(err)
	}
	if err := w.Put([]byte("empty value"), nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	s := db.Snapshot()
	defer s.Release()
	verify(t, s, model{"kkkkkkkkkkkkkkkk": []byte("at the limit"), "": []byte("empty key"), "empty value": {}})
	if s.MaxKeyLength() != 16 {
		t.Fatal(s.MaxKeyLength())
	}
	c := connect()
	defer c.Close()
	if err := kv.Create(ctx, c, "/toolong", kv.CreateOptions{MaxKeyLength: kv.MaxKeyLengthLimit + 1}); err == nil {
		t.Fatal("limit over MaxKeyLengthLimit accepted")
	}
}

// TestVacuum: replaced and deleted values leave garbage; vacuum reclaims
// all of it while a reader holds a snapshot of the old file, which it
// keeps reading.
func TestVacuum(t *testing.T) {
	ctx := context.Background()
	c, db := newDB(t, kv.CreateOptions{Rep: 2}, kv.Options{})
	m := model{}
	r := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 5; round++ {
		w, _ := db.Begin(ctx)
		for i := 0; i < 200; i++ {
			k := fmt.Sprintf("key%04d", r.IntN(300))
			if r.IntN(4) == 0 {
				w.Delete([]byte(k))
				delete(m, k)
				continue
			}
			v := randBytes(r, 2000)
			w.Put([]byte(k), v)
			m[k] = v
		}
		if err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before := db.Stats()
	if before.Garbage < 100000 {
		t.Fatalf("little garbage: %+v", before)
	}
	old := db.Snapshot()
	defer old.Release()
	// Readers refresh and read all along; none waits, none sees anything
	// but the one content (in the old file or the new).
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	var reads [2]atomic.Int64
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rdb, err := kv.Open(ctx, c, "/db", kv.Options{CacheBytes: 1 << 20})
			if err != nil {
				errs <- err
				return
			}
			defer rdb.Close()
			for !stop.Load() || reads[r].Load() < 3 {
				if err := rdb.Refresh(ctx); err != nil {
					errs <- err
					return
				}
				s := rdb.Snapshot()
				for k, v := range m {
					if got, err := s.Get([]byte(k)); err != nil || !bytes.Equal(got, v) {
						errs <- fmt.Errorf("reader during vacuum, version %d, key %s: %v", s.Version(), k, err)
						s.Release()
						return
					}
				}
				s.Release()
				reads[r].Add(1)
			}
		}()
	}
	st, err := db.Vacuum(ctx, kv.VacuumOptions{})
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	after := db.Stats()
	if after.Garbage != 0 || after.FileSize >= before.FileSize || st.Reclaimed != before.FileSize-after.FileSize || after.Version != before.Version+1 {
		t.Fatalf("vacuum %+v: before %+v after %+v", st, before, after)
	}
	verify(t, old, m)
	s := db.Snapshot()
	verify(t, s, m)
	s.Release()
	// The database goes on after a vacuum.
	w, _ := db.Begin(ctx)
	w.Put([]byte("after"), bytes.Repeat([]byte("a"), 500))
	m["after"] = bytes.Repeat([]byte("a"), 500)
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	s = db.Snapshot()
	verify(t, s, m)
	s.Release()
}

// TestSmallCommitsWriteLittle: single-key commits write their own bytes
// into fresh blocks (never reading back and rewriting the previous
// commit's last block); every TailCommits-th compacts, rewriting at most
// one old block plus the tail's live data; the file never holds more
// than TailCommits blocks of padding.
func TestSmallCommitsWriteLittle(t *testing.T) {
	ctx := context.Background()
	const tail = 8
	_, db := newDB(t, kv.CreateOptions{}, kv.Options{TailCommits: tail})
	// A base of a few hundred keys, so that a commit changes a path of a
	// real tree.
	w, _ := db.Begin(ctx)
	for i := 0; i < 3000; i++ {
		w.Put([]byte(fmt.Sprintf("base%05d", i)), bytes.Repeat([]byte{byte(i)}, 300))
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	m := model{}
	compacted := 0
	for i := 0; i < 5*tail; i++ {
		w, _ := db.Begin(ctx)
		k := fmt.Sprintf("base%05d", (i*7919)%3000)
		v := bytes.Repeat([]byte{byte(i)}, 1000)
		w.Put([]byte(k), v)
		m[k] = v
		st, err := w.CommitStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Compacted {
			compacted++
			// The tail's live values and at most one old block's worth.
			if st.Written > testBS+int64(tail)*(1000+3*4096)+96 {
				t.Fatalf("commit %d compacted, wrote %d bytes", i, st.Written)
			}
		} else {
			if st.Start%testBS != 0 {
				t.Fatalf("commit %d started at %d, not a block boundary", i, st.Start)
			}
			if st.Written > 1000+3*4096+96 {
				t.Fatalf("commit %d wrote %d bytes", i, st.Written)
			}
		}
		stats := db.Stats()
		if pad := stats.Garbage; pad > int64(tail+1)*testBS+int64(i+1)*3*4096 {
			t.Fatalf("commit %d: %d bytes of garbage (%+v)", i, pad, stats)
		}
	}
	if compacted < 5*tail/tail-1 {
		t.Fatalf("%d compactions", compacted)
	}
	s := db.Snapshot()
	defer s.Release()
	for k, v := range m {
		if got, err := s.Get([]byte(k)); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("%s: %v", k, err)
		}
	}
}

// TestLookupsNeedNoNamenode: once open, lookups, scans and streamed
// values make no namenode request.
func TestLookupsNeedNoNamenode(t *testing.T) {
	ctx := context.Background()
	c, db := newDB(t, kv.CreateOptions{}, kv.Options{})
	w, _ := db.Begin(ctx)
	for i := 0; i < 2000; i++ {
		w.Put([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte{byte(i)}, 30000))
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	db.Refresh(ctx)
	before := clientx.NamenodeRequests(c)
	for i := 0; i < 2000; i += 7 {
		if _, err := db.Get([]byte(fmt.Sprintf("k%05d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.Count(kv.Range{Prefix: []byte("k010")}); err != nil || n != 100 {
		t.Fatalf("count %d %v", n, err)
	}
	if after := clientx.NamenodeRequests(c); after != before {
		t.Fatalf("%d namenode requests for lookups", after-before)
	}
}

// TestNotADatabase: opening a directory without a database, or a file
// that is not one, fails clearly.
func TestNotADatabase(t *testing.T) {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	if _, err := kv.Open(ctx, c, "/no-such-db", kv.Options{}); err == nil {
		t.Fatal("opened a missing database")
	}
	c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		tx.MkdirAll(ctx, "/fake", 0)
		f, err := tx.CreateFile(ctx, "/fake/kv", client.CreateOptions{})
		if err != nil {
			return err
		}
		_, err = f.Write(bytes.Repeat([]byte("not a database "), 20))
		return err
	})
	if _, err := kv.Open(ctx, c, "/fake", kv.Options{}); !errors.Is(err, kv.ErrCorrupt) {
		t.Fatalf("open of a non-database: %v", err)
	}
}
