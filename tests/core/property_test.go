package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestRandomOperationsProperty: several clients, each its own
// client.Client, run random transactions (create, write random data,
// truncate, read, rename also over existing names and whole directories,
// hard link, unlink, mkdir, rmdir, and operations that must fail), one to
// four operations each, some deliberately aborted. A model follows the
// committed transactions only (a conflict means "did not happen").
// Afterwards fsck is clean and the namespace, link counts, inode identity
// and every file's content equal the model's.
//
// Each transaction predicts its operations' outcomes on a snapshot of the
// model taken when it begins. When it ends, the test checks (under the
// model's lock) that no transaction committed since then changed anything
// it looked at: only then are its observations compared with the
// predictions (a difference is a bug), and only then does it commit, so
// the model applies committed transactions in commit order. Otherwise it
// is aborted. PLASMA_PROPERTY_SEED=N repeats a run's random choices.
func TestRandomOperationsProperty(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PLASMA_PROPERTY_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("PLASMA_PROPERTY_SEED: %v", err)
		}
	}
	t.Logf("seed %d (PLASMA_PROPERTY_SEED=%d repeats it)", seed, seed)
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	setup := c.Client(client.Config{})
	defer setup.Close()
	if err := setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { _, err := tx.Mkdir(ctx, propRoot, 0); return err }); err != nil {
		t.Fatal(err)
	}
	bs := int(c.Opts.Blocksize)
	m := &propModel{state: newPropState(), vers: map[string]uint64{}}
	const workers, txns = 6, 2000
	var wg sync.WaitGroup
	var stats [workers]propStats
	for w := 0; w < workers; w++ {
		cl := c.Client(client.Config{})
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			pw := &propWorker{t: t, id: w, cl: cl, m: m, bs: bs, r: mrand.New(mrand.NewPCG(seed, uint64(w))), stats: &stats[w]}
			for i := 0; i < txns && !t.Failed(); i++ {
				pw.txn(ctx, i)
			}
		}()
	}
	wg.Wait()
	var total propStats
	for _, s := range stats {
		total.commits += s.commits
		total.aborts += s.aborts
		total.conflicts += s.conflicts
		total.stale += s.stale
		total.ops += s.ops
	}
	t.Logf("%d transactions: %d committed (%d operations), %d aborted on purpose, %d conflicts, %d retried for a stale snapshot",
		workers*txns, total.commits, total.ops, total.aborts, total.conflicts, total.stale)
	if t.Failed() {
		return
	}
	if total.commits < workers*txns/4 {
		t.Errorf("only %d of %d transactions committed: the test exercises too little", total.commits, workers*txns)
	}
	checkAgainstModel(t, c.Client(client.Config{}), m.state)
	rep, err := setup.Fsck(ctx)
	if err != nil {
		t.Fatalf("fsck: %v", err)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("fsck after random operations (seed %d):\n%s", seed, strings.Join(rep.Problems, "\n"))
	}
}

const propRoot = "/prop"

var (
	propDirs  = []string{propRoot + "/d0", propRoot + "/d1", propRoot + "/d2"}
	propNames = []string{"f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7"}
	propFiles []string // every file path: in propRoot and in each of propDirs
)

func init() {
	for _, d := range append([]string{propRoot}, propDirs...) {
		for _, n := range propNames {
			propFiles = append(propFiles, d+"/"+n)
		}
	}
}

// propEntry is what a name is bound to: a directory, or a file (an inode
// of the model, shared by hard links).
type propEntry struct {
	dir bool
	id  uint64
}

type propState struct {
	ents map[string]propEntry
	data map[uint64][]byte // file contents (never changed in place)
}

func newPropState() *propState {
	return &propState{ents: map[string]propEntry{}, data: map[uint64][]byte{}}
}

func (s *propState) clone() *propState {
	return &propState{ents: maps.Clone(s.ents), data: maps.Clone(s.data)}
}

func (s *propState) parentOK(p string) bool {
	d := path.Dir(p)
	return d == propRoot || s.ents[d].dir
}

func (s *propState) children(d string) []string {
	var out []string
	for p := range s.ents {
		if path.Dir(p) == d {
			out = append(out, path.Base(p))
		}
	}
	sort.Strings(out)
	return out
}

func (s *propState) links(id uint64) int {
	n := 0
	for _, e := range s.ents {
		if !e.dir && e.id == id {
			n++
		}
	}
	return n
}

// propOp is one operation of a transaction.
type propOp struct {
	kind     string
	a, b     string
	off      int64
	size     int64
	data     []byte
	id       uint64 // new inode of a create
	rep      int
	expected error // predicted outcome
}

func (o *propOp) String() string {
	switch o.kind {
	case "write":
		return fmt.Sprintf("write(%s, off %d, %d bytes)", o.a, o.off, len(o.data))
	case "truncate":
		return fmt.Sprintf("truncate(%s, %d)", o.a, o.size)
	}
	if o.b != "" {
		return fmt.Sprintf("%s(%s, %s)", o.kind, o.a, o.b)
	}
	return fmt.Sprintf("%s(%s)", o.kind, o.a)
}

// apply changes s as the operation does in the filesystem and returns the
// keys the outcome depends on, those it changes, and its predicted error
// (keys: "p:" a name's binding, "l:" a directory's listing, "i:" a file's
// content).
func (s *propState) apply(o *propOp) (reads, writes []string, err error) {
	a, b := o.a, o.b
	pa, pb := path.Dir(a), path.Dir(b)
	ino := func(p string) string { return "i:" + strconv.FormatUint(s.ents[p].id, 10) }
	reads = []string{"p:" + a, "p:" + pa}
	switch o.kind {
	case "create":
		if !s.parentOK(a) {
			return reads, nil, client.ErrNotFound
		}
		if _, ok := s.ents[a]; ok {
			return reads, nil, client.ErrExists
		}
		s.ents[a] = propEntry{id: o.id}
		s.data[o.id] = nil
		return reads, []string{"p:" + a, "l:" + pa}, nil
	case "mkdir":
		if _, ok := s.ents[a]; ok {
			return reads, nil, client.ErrExists
		}
		s.ents[a] = propEntry{dir: true}
		return reads, []string{"p:" + a, "l:" + pa}, nil
	case "rmdir":
		reads = append(reads, "l:"+a)
		e, ok := s.ents[a]
		switch {
		case !ok:
			return reads, nil, client.ErrNotFound
		case !e.dir:
			return reads, nil, client.ErrNotDir
		case len(s.children(a)) > 0:
			return reads, nil, client.ErrNotEmpty
		}
		delete(s.ents, a)
		return reads, []string{"p:" + a, "l:" + pa}, nil
	case "unlink":
		e, ok := s.ents[a]
		switch {
		case !s.parentOK(a) || !ok:
			return reads, nil, client.ErrNotFound
		case e.dir:
			return reads, nil, client.ErrIsDir
		}
		delete(s.ents, a)
		return reads, []string{"p:" + a, "l:" + pa}, nil
	case "write", "truncate", "read":
		e, ok := s.ents[a]
		switch {
		case !s.parentOK(a) || !ok:
			return reads, nil, client.ErrNotFound
		case e.dir:
			return reads, nil, client.ErrIsDir
		}
		reads = append(reads, ino(a))
		old := s.data[e.id]
		var nd []byte
		switch o.kind {
		case "read":
			return reads, nil, nil
		case "write":
			end := max(int64(len(old)), o.off+int64(len(o.data)))
			nd = make([]byte, end)
			copy(nd, old)
			copy(nd[o.off:], o.data)
		case "truncate":
			nd = make([]byte, o.size)
			copy(nd, old)
		}
		s.data[e.id] = nd
		return reads, []string{ino(a)}, nil
	case "link":
		reads = append(reads, "p:"+b, "p:"+pb)
		e, ok := s.ents[a]
		switch {
		case !s.parentOK(a) || !ok || !s.parentOK(b):
			return reads, nil, client.ErrNotFound
		case e.dir:
			return reads, nil, client.ErrPermission
		}
		if _, ok := s.ents[b]; ok {
			return reads, nil, client.ErrExists
		}
		s.ents[b] = e
		return reads, []string{"p:" + b, "l:" + pb}, nil
	case "rename":
		reads = append(reads, "p:"+b, "p:"+pb)
		src, ok := s.ents[a]
		if !s.parentOK(a) || !s.parentOK(b) || !ok {
			return reads, nil, client.ErrNotFound
		}
		if a == b {
			return reads, nil, nil
		}
		if src.dir {
			if strings.HasPrefix(b, a+"/") {
				return reads, nil, client.ErrInvalid // into itself
			}
			for _, n := range propNames {
				reads = append(reads, "p:"+a+"/"+n, "p:"+b+"/"+n)
			}
			reads = append(reads, "l:"+a, "l:"+b)
		}
		if dst, ok := s.ents[b]; ok {
			switch {
			case dst.dir && !src.dir:
				return reads, nil, client.ErrIsDir
			case !dst.dir && src.dir:
				return reads, nil, client.ErrNotDir
			case dst.dir && len(s.children(b)) > 0:
				return reads, nil, client.ErrNotEmpty
			}
		}
		writes = []string{"p:" + a, "p:" + b, "l:" + pa, "l:" + pb}
		delete(s.ents, a)
		s.ents[b] = src
		if src.dir {
			for _, n := range propNames {
				if e, ok := s.ents[a+"/"+n]; ok {
					delete(s.ents, a+"/"+n)
					s.ents[b+"/"+n] = e
				}
			}
			writes = append(writes, "l:"+a, "l:"+b)
			for _, n := range propNames {
				writes = append(writes, "p:"+a+"/"+n, "p:"+b+"/"+n)
			}
		}
		return reads, writes, nil
	}
	panic("unknown operation " + o.kind)
}

// propModel is the committed state, with a version per key.
type propModel struct {
	mu    sync.Mutex
	state *propState
	seq   uint64
	vers  map[string]uint64
}

type propStats struct{ commits, aborts, conflicts, stale, ops int }

type propWorker struct {
	t      *testing.T
	id     int
	cl     *client.Client
	m      *propModel
	bs     int
	r      *mrand.Rand
	stats  *propStats
	nextID uint64
}

func (w *propWorker) pick(l []string) string { return l[w.r.IntN(len(l))] }

// pickFile returns a file path, mostly one that exists in s.
func (w *propWorker) pickFile(s *propState) string {
	if w.r.IntN(4) > 0 {
		var have []string
		for _, p := range propFiles {
			if e, ok := s.ents[p]; ok && !e.dir {
				have = append(have, p)
			}
		}
		if len(have) > 0 {
			return w.pick(have)
		}
	}
	return w.pick(propFiles)
}

func (w *propWorker) randomData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(w.r.Uint32())
	}
	return b
}

// newOp makes a random operation against the snapshot s.
func (w *propWorker) newOp(s *propState) *propOp {
	r := w.r
	switch k := r.IntN(100); {
	case k < 20:
		w.nextID++
		return &propOp{kind: "create", a: w.pick(propFiles), id: uint64(w.id+1)<<32 | w.nextID, rep: 1 + r.IntN(2)}
	case k < 38:
		p := w.pickFile(s)
		size := int64(len(s.data[s.ents[p].id]))
		n := 1 + r.IntN(2*w.bs+w.bs/2)
		if r.IntN(3) == 0 {
			n = 1 + r.IntN(300)
		}
		return &propOp{kind: "write", a: p, off: r.Int64N(size + int64(w.bs) + 1), data: w.randomData(n)}
	case k < 45:
		p := w.pickFile(s)
		size := int64(len(s.data[s.ents[p].id]))
		return &propOp{kind: "truncate", a: p, size: r.Int64N(size + int64(w.bs) + 1)}
	case k < 53:
		return &propOp{kind: "read", a: w.pickFile(s)}
	case k < 64:
		return &propOp{kind: "rename", a: w.pickFile(s), b: w.pick(propFiles)}
	case k < 71:
		return &propOp{kind: "link", a: w.pickFile(s), b: w.pick(propFiles)}
	case k < 79:
		return &propOp{kind: "unlink", a: w.pickFile(s)}
	case k < 87:
		return &propOp{kind: "mkdir", a: w.pick(propDirs)}
	case k < 92:
		return &propOp{kind: "rmdir", a: w.pick(propDirs)}
	case k < 95:
		return &propOp{kind: "rename", a: w.pick(propDirs), b: w.pick(propDirs)}
	}
	// Operations on the wrong type (they must fail), where the snapshot
	// has a directory and a file to try them on.
	d, f := w.pick(propDirs), w.pickFile(s)
	if !s.ents[d].dir {
		return &propOp{kind: "mkdir", a: d}
	}
	if e, ok := s.ents[f]; !ok || e.dir {
		return &propOp{kind: "read", a: f}
	}
	switch r.IntN(6) {
	case 0:
		return &propOp{kind: "rename", a: f, b: d}
	case 1:
		return &propOp{kind: "rename", a: d, b: f}
	case 2:
		return &propOp{kind: "link", a: d, b: w.pick(propFiles)}
	case 3:
		return &propOp{kind: "unlink", a: d}
	case 4:
		return &propOp{kind: "rmdir", a: f}
	}
	return &propOp{kind: "write", a: d, data: []byte("x")}
}

// do runs o in tx and returns its error and, for a read, what it read.
func (w *propWorker) do(ctx context.Context, tx *client.Txn, o *propOp) ([]byte, error) {
	switch o.kind {
	case "create":
		_, err := tx.Create(ctx, o.a, client.CreateOptions{Rep: o.rep})
		return nil, err
	case "mkdir":
		_, err := tx.Mkdir(ctx, o.a, 0)
		return nil, err
	case "rmdir":
		return nil, tx.Rmdir(ctx, o.a)
	case "unlink":
		return nil, tx.Unlink(ctx, o.a)
	case "rename":
		return nil, tx.Rename(ctx, o.a, o.b)
	case "link":
		return nil, tx.Link(ctx, o.a, o.b)
	}
	f, err := tx.Open(ctx, o.a)
	if err != nil {
		return nil, err
	}
	var got []byte
	switch o.kind {
	case "write":
		_, err = f.WriteAt(o.data, o.off)
	case "truncate":
		err = f.Truncate(o.size)
	case "read":
		got = make([]byte, f.Size())
		var n int
		n, err = f.ReadAt(got, 0)
		if err == io.EOF && n == len(got) {
			err = nil
		}
		got = got[:n]
	}
	// Close flushes the writes to the transaction, so a later Open in it
	// sees them.
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return got, err
}

func sameOutcome(pred, got error) bool {
	if pred == nil {
		return got == nil
	}
	return errors.Is(got, pred)
}

// txn runs one random transaction.
func (w *propWorker) txn(ctx context.Context, i int) {
	w.m.mu.Lock()
	snap, snapSeq := w.m.state.clone(), w.m.seq
	w.m.mu.Unlock()
	local := snap
	tx := w.cl.Begin()
	var ops []*propOp
	reads := map[string]bool{}
	var mismatch string
	n := 1 + w.r.IntN(4)
	for k := 0; k < n; k++ {
		o := w.newOp(local)
		before := local.clone()
		rk, _, pred := local.apply(o)
		o.expected = pred
		for _, key := range rk {
			reads[key] = true
		}
		got, err := w.do(ctx, tx, o)
		if errors.Is(err, client.ErrConflict) {
			tx.Abort(ctx)
			w.stats.conflicts++
			return
		}
		ops = append(ops, o)
		if !sameOutcome(pred, err) {
			mismatch = fmt.Sprintf("%v: got error %v, the model predicts %v", o, err, pred)
			break
		}
		if o.kind == "read" && err == nil {
			if want := before.data[before.ents[o.a].id]; !bytes.Equal(got, want) {
				mismatch = fmt.Sprintf("%v: read %d bytes that differ from the model's %d (first difference at %d)", o, len(got), len(want), firstDiff(got, want))
				break
			}
		}
	}
	abort := mismatch != "" || w.r.IntN(7) == 0
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	for key := range reads {
		if w.m.vers[key] > snapSeq {
			// Another transaction committed a change to what this one
			// looked at: its predictions do not hold; drop it.
			tx.Abort(ctx)
			w.stats.stale++
			return
		}
	}
	if mismatch != "" {
		w.t.Errorf("worker %d transaction %d [%v]: %s", w.id, i, ops, mismatch)
	}
	if abort {
		tx.Abort(ctx)
		w.stats.aborts++
		return
	}
	if err := tx.Commit(ctx); err != nil {
		if errors.Is(err, client.ErrConflict) {
			w.stats.conflicts++
			return
		}
		w.t.Errorf("worker %d transaction %d [%v]: commit: %v", w.id, i, ops, err)
		return
	}
	// Committed: apply it to the model in commit order.
	w.m.seq++
	for _, o := range ops {
		_, writes, pred := w.m.state.apply(o)
		if !sameOutcome(o.expected, pred) {
			w.t.Errorf("model replay of %v differs: %v vs %v", o, pred, o.expected)
		}
		for _, key := range writes {
			w.m.vers[key] = w.m.seq
		}
	}
	w.stats.commits++
	w.stats.ops += len(ops)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// checkAgainstModel compares the filesystem under propRoot with s.
func checkAgainstModel(t *testing.T, cl *client.Client, s *propState) {
	t.Helper()
	defer cl.Close()
	ctx := context.Background()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	for _, d := range append([]string{propRoot}, propDirs...) {
		if d != propRoot && !s.ents[d].dir {
			if _, err := tx.Lstat(ctx, d); !errors.Is(err, client.ErrNotFound) {
				t.Errorf("%s: the model has no such directory; lstat: %v", d, err)
			}
			continue
		}
		ents, err := tx.ReadDir(ctx, d)
		if err != nil {
			t.Errorf("readdir %s: %v", d, err)
			continue
		}
		var got []string
		for _, e := range ents {
			got = append(got, e.Name)
		}
		if want := s.children(d); !slices.Equal(got, want) {
			t.Errorf("%s holds %v, the model %v", d, got, want)
		}
	}
	inos := map[uint64]uint64{} // model inode → filesystem inode
	owner := map[uint64]uint64{}
	files := 0
	for _, p := range propFiles {
		e, ok := s.ents[p]
		if !ok || e.dir {
			continue
		}
		files++
		fi, err := tx.Lstat(ctx, p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Type != client.TypeFile {
			t.Errorf("%s: type %v, want a file", p, fi.Type)
			continue
		}
		if prev, ok := inos[e.id]; ok && prev != fi.Ino {
			t.Errorf("%s: inode %d, but another name of the same file has inode %d", p, fi.Ino, prev)
		}
		if prev, ok := owner[fi.Ino]; ok && prev != e.id {
			t.Errorf("%s: inode %d is also another file's", p, fi.Ino)
		}
		inos[e.id], owner[fi.Ino] = fi.Ino, e.id
		if want := s.links(e.id); int(fi.Nlink) != want {
			t.Errorf("%s: link count %d, the model has %d names", p, fi.Nlink, want)
		}
		want := s.data[e.id]
		f, err := tx.Open(ctx, p)
		if err != nil {
			t.Errorf("open %s: %v", p, err)
			continue
		}
		got, err := io.ReadAll(f)
		if err != nil {
			t.Errorf("read %s: %v", p, err)
		} else if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes that differ from the model's %d (first difference at %d)", p, len(got), len(want), firstDiff(got, want))
		}
		f.Close()
	}
	t.Logf("model: %d names of %d files", files, len(inos))
}

// TestExtendNewFileThenReopen is a case the property test found, made
// deterministic: a file created and extended (truncate to a larger size,
// no data written) in one transaction, then opened again in it, must show
// its new size and read as zeros. It must not look empty until commit.
func TestExtendNewFileThenReopen(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	const size = 12844
	tx := cl.Begin()
	defer tx.Abort(ctx)
	f, err := tx.CreateFile(ctx, "/extended", client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := tx.Lookup(ctx, "/extended"); err != nil || fi.Size != size {
		t.Errorf("lookup in the creating transaction: size %d, %v; want %d", fi.Size, err, size)
	}
	g, err := tx.Open(ctx, "/extended")
	if err != nil {
		t.Fatal(err)
	}
	if g.Size() != size {
		t.Errorf("reopened in the creating transaction: size %d, want %d", g.Size(), size)
	}
	got, err := io.ReadAll(g)
	if err != nil || !bytes.Equal(got, make([]byte, size)) {
		t.Errorf("reopened in the creating transaction: read %d bytes, %v; want %d zeros", len(got), err, size)
	}
}
