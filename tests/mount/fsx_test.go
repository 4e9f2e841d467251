package mount

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestFsx (issue 19 item 8c) is a model-checked random exerciser in the
// spirit of fsx: random writes (with holes), truncates up and down,
// mmap reads and writes, fsync, close and reopen, two handles on one
// file; after every operation the file's content as the target shows it
// is compared with an in-memory model, and a mismatch reports the seed
// and the operations so far. It runs through the FUSE mount and through
// the client library (client.File), at a 64 KiB block size and at the
// default 1 MiB, for a fixed set of seeds and the one in $PLASMA_FSX_SEED.
func TestFsx(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if s := os.Getenv("PLASMA_FSX_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PLASMA_FSX_SEED=%q: not a number", s)
		}
		if !slices.Contains(seeds, n) {
			seeds = append(seeds, n)
		}
	}
	for _, bs := range []int64{64 << 10, 1 << 20} {
		t.Run(fmt.Sprintf("bs=%dK", bs>>10), func(t *testing.T) {
			c := clustertest.Start(t, clustertest.Options{Blocksize: bs, Size: 128 << 20})
			t.Run("client", func(t *testing.T) {
				cl := c.Client(client.Config{})
				defer cl.Close()
				for _, seed := range seeds {
					runFsx(t, newLibFsx(t, cl, fmt.Sprintf("/fsx-%d", seed)), seed, int(bs), 200)
				}
			})
			t.Run("mount", func(t *testing.T) {
				m := testkit.StartMount(t, c)
				cl := c.Client(client.Config{})
				defer cl.Close()
				for _, seed := range seeds {
					name := fmt.Sprintf("mount-fsx-%d", seed)
					runFsx(t, newMountFsx(t, m.Path(name), cl, "/"+name), seed, int(bs), 200)
				}
			})
		})
	}
}

// fsxTarget is a file under test with two handles (0 and 1) on it.
type fsxTarget interface {
	write(h int, p []byte, off int64) error
	read(h int, p []byte, off int64) (int, error)
	truncate(h int, size int64) error
	fsync(h int) error
	reopen(h int) error
	// reopenAll closes both handles (the last close ends what the target
	// keeps of the open file), then opens them again.
	reopenAll() error
	// mmapRead returns the file's bytes as a shared mapping shows them;
	// mmapWrite changes p at off through one (within the file's size).
	// ok is false where the target has no mmap.
	mmapRead(h int, size int) (b []byte, ok bool, err error)
	mmapWrite(h int, p []byte, off int64, size int) (ok bool, err error)
	// contents returns the size and the bytes the target shows now;
	// fresh also reads them through a new open (of another transaction
	// where the target has them).
	contents(fresh bool) (size int64, b []byte, err error)
	// committed returns the bytes another client reads (what fsync and
	// the last close committed).
	committed() ([]byte, error)
	close() error
}

// runFsx runs ops random operations on target, checking it against the
// model after each.
func runFsx(t *testing.T, target fsxTarget, seed uint64, bs, ops int) {
	t.Helper()
	defer target.close()
	rng := rand.New(rand.NewPCG(seed, uint64(bs)))
	maxSize := min(4*bs+bs/2, 3<<20)
	var model []byte
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("fsx seed %d, blocksize %d: %s\noperations (replay with PLASMA_FSX_SEED=%d):\n  %s",
			seed, bs, fmt.Sprintf(format, args...), seed, strings.Join(log, "\n  "))
	}
	randData := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32()) | 1 // never zero: holes show
		}
		return p
	}
	randLen := func() int {
		switch r := rng.IntN(10); {
		case r < 5:
			return 1 + rng.IntN(512)
		case r < 8:
			return 1 + rng.IntN(bs)
		default:
			return 1 + rng.IntN(2*bs)
		}
	}
	for i := 0; i < ops; i++ {
		h := rng.IntN(2)
		var err error
		switch r := rng.IntN(100); {
		case r < 35: // write, possibly past the end (a hole)
			off := rng.IntN(maxSize)
			n := min(randLen(), maxSize-off)
			p := randData(n)
			log = append(log, fmt.Sprintf("%d: write h%d off=%d len=%d (size %d)", i, h, off, n, len(model)))
			err = target.write(h, p, int64(off))
			if need := off + n; need > len(model) {
				model = append(model, make([]byte, need-len(model))...)
			}
			copy(model[off:], p)
		case r < 50: // truncate, up or down
			size := rng.IntN(maxSize + 1)
			if rng.IntN(3) == 0 && len(model) > 0 {
				size = rng.IntN(len(model)) // down, more often
			}
			log = append(log, fmt.Sprintf("%d: truncate h%d %d (size %d)", i, h, size, len(model)))
			err = target.truncate(h, int64(size))
			if size < len(model) {
				model = model[:size]
			} else {
				model = append(model, make([]byte, size-len(model))...)
			}
		case r < 60: // mmap read
			if len(model) == 0 {
				continue
			}
			log = append(log, fmt.Sprintf("%d: mmap read h%d (size %d)", i, h, len(model)))
			var b []byte
			var ok bool
			b, ok, err = target.mmapRead(h, len(model))
			if err == nil && ok && !bytes.Equal(b, model) {
				fail("mmap read: %s", describeDiff(b, model))
			}
		case r < 72: // mmap write within the file
			if len(model) == 0 {
				continue
			}
			off := rng.IntN(len(model))
			n := min(randLen(), len(model)-off)
			p := randData(n)
			log = append(log, fmt.Sprintf("%d: mmap write h%d off=%d len=%d (size %d)", i, h, off, n, len(model)))
			var ok bool
			ok, err = target.mmapWrite(h, p, int64(off), len(model))
			if ok {
				copy(model[off:], p)
			}
		case r < 77: // a read somewhere, maybe past the end
			off := rng.IntN(maxSize)
			n := randLen()
			log = append(log, fmt.Sprintf("%d: read h%d off=%d len=%d (size %d)", i, h, off, n, len(model)))
			p := make([]byte, n)
			var got int
			got, err = target.read(h, p, int64(off))
			if err == io.EOF {
				err = nil
			}
			want := model[min(off, len(model)):min(off+n, len(model))]
			if err == nil && !bytes.Equal(p[:got], want) {
				fail("read at %d: %s", off, describeDiff(p[:got], want))
			}
		case r < 85:
			log = append(log, fmt.Sprintf("%d: fsync h%d", i, h))
			err = target.fsync(h)
		case r < 90:
			log = append(log, fmt.Sprintf("%d: close both handles and reopen them", i))
			err = target.reopenAll()
		default:
			log = append(log, fmt.Sprintf("%d: close and reopen h%d", i, h))
			err = target.reopen(h)
		}
		if err != nil {
			fail("operation %d: %v", i, err)
		}
		if op := log[len(log)-1]; strings.Contains(op, "fsync") || strings.Contains(op, "close both") {
			b, err := target.committed()
			if err != nil {
				fail("read of the committed file after operation %d: %v", i, err)
			}
			if !bytes.Equal(b, model) {
				fail("after operation %d, another client reads: %s", i, describeDiff(b, model))
			}
		}
		size, b, err := target.contents(i%4 == 3)
		if err != nil {
			fail("read after operation %d: %v", i, err)
		}
		if size != int64(len(model)) {
			fail("after operation %d: size %d, model %d", i, size, len(model))
		}
		if !bytes.Equal(b, model) {
			fail("after operation %d: %s", i, describeDiff(b, model))
		}
	}
}

// describeDiff says where got first differs from want.
func describeDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	if i == len(got) && i == len(want) {
		return "same bytes"
	}
	at := func(b []byte) string {
		if i >= len(b) {
			return "end"
		}
		return fmt.Sprintf("%#02x", b[i])
	}
	return fmt.Sprintf("%d bytes read, model %d; first difference at byte %d: read %s, model %s", len(got), len(want), i, at(got), at(want))
}

// mountFsx is a file in the FUSE mount, open twice (O_RDWR).
type mountFsx struct {
	t     *testing.T
	path  string
	h     [2]*os.File
	cl    *client.Client // another client of the cluster
	cpath string         // the file's path in PlasmaFS
}

func newMountFsx(t *testing.T, path string, cl *client.Client, cpath string) *mountFsx {
	t.Helper()
	m := &mountFsx{t: t, path: path, cl: cl, cpath: cpath}
	testkit.MustOK(t, "create", os.WriteFile(path, nil, 0o644))
	for i := range m.h {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		testkit.MustOK(t, "open", err)
		m.h[i] = f
	}
	return m
}

func (m *mountFsx) write(h int, p []byte, off int64) error {
	_, err := m.h[h].WriteAt(p, off)
	return err
}

func (m *mountFsx) read(h int, p []byte, off int64) (int, error) {
	return m.h[h].ReadAt(p, off)
}

func (m *mountFsx) truncate(h int, size int64) error {
	return syscall.Ftruncate(int(m.h[h].Fd()), size)
}

func (m *mountFsx) fsync(h int) error { return m.h[h].Sync() }

func (m *mountFsx) reopen(h int) error {
	if err := m.h[h].Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	f, err := os.OpenFile(m.path, os.O_RDWR, 0)
	m.h[h] = f
	return err
}

func (m *mountFsx) reopenAll() error {
	for h, f := range m.h {
		if err := f.Close(); err != nil {
			return fmt.Errorf("close h%d: %w", h, err)
		}
	}
	for h := range m.h {
		f, err := os.OpenFile(m.path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		m.h[h] = f
	}
	return nil
}

func (m *mountFsx) mmapRead(h int, size int) ([]byte, bool, error) {
	b, err := syscall.Mmap(int(m.h[h].Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, true, fmt.Errorf("mmap: %w", err)
	}
	defer syscall.Munmap(b)
	return bytes.Clone(b), true, nil
}

func (m *mountFsx) mmapWrite(h int, p []byte, off int64, size int) (bool, error) {
	b, err := syscall.Mmap(int(m.h[h].Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return true, fmt.Errorf("mmap: %w", err)
	}
	copy(b[off:], p)
	// msync(MS_SYNC): the pages are written back before munmap.
	serr := unix.Msync(b, unix.MS_SYNC)
	if err := syscall.Munmap(b); err != nil {
		return true, fmt.Errorf("munmap: %w", err)
	}
	if serr != nil {
		return true, fmt.Errorf("msync: %w", serr)
	}
	return true, nil
}

func (m *mountFsx) contents(fresh bool) (int64, []byte, error) {
	st, err := m.h[0].Stat()
	if err != nil {
		return 0, nil, err
	}
	b := make([]byte, st.Size()+1)
	n, err := m.h[0].ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return 0, nil, err
	}
	b = b[:n]
	if fresh {
		again, err := os.ReadFile(m.path)
		if err != nil {
			return 0, nil, fmt.Errorf("read through a new open: %w", err)
		}
		if !bytes.Equal(again, b) {
			return 0, nil, fmt.Errorf("a new open reads other bytes than the open handle: %s", describeDiff(again, b))
		}
	}
	return st.Size(), b, nil
}

func (m *mountFsx) committed() ([]byte, error) { return testkit.ReadWhole(m.t, m.cl, m.cpath), nil }

func (m *mountFsx) close() error {
	var errs []error
	for _, f := range m.h {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// libFsx is a file through the client library: one transaction with the
// file open; fsync commits it (and the next operation opens a new one);
// reopen closes the File and opens it again in the same transaction. The
// client has no mmap. Its two handles are two Files opened one after the
// other in the transaction (a File reads its transaction's flushed
// writes): switching handles flushes the one used before and opens the
// other anew.
type libFsx struct {
	t    *testing.T
	cl   *client.Client
	path string
	ctx  context.Context
	tx   *client.Txn
	f    *client.File
	cur  int // the handle f is
}

func newLibFsx(t *testing.T, cl *client.Client, path string) *libFsx {
	t.Helper()
	l := &libFsx{t: t, cl: cl, path: path, ctx: context.Background()}
	testkit.MustOK(t, "create", cl.Txn(l.ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.CreateFile(ctx, path, client.CreateOptions{})
		if err != nil {
			return err
		}
		return f.Close()
	}))
	return l
}

// file returns handle h's File, opening a transaction or switching
// handles as needed.
func (l *libFsx) file(h int) (*client.File, error) {
	if l.tx == nil {
		l.tx = l.cl.Begin()
	}
	if l.f != nil && l.cur == h {
		return l.f, nil
	}
	if l.f != nil {
		if err := l.f.Close(); err != nil {
			return nil, fmt.Errorf("close handle %d: %w", l.cur, err)
		}
	}
	f, err := l.tx.Open(l.ctx, l.path)
	if err != nil {
		return nil, err
	}
	l.f, l.cur = f, h
	return f, nil
}

func (l *libFsx) write(h int, p []byte, off int64) error {
	f, err := l.file(h)
	if err == nil {
		_, err = f.WriteAt(p, off)
	}
	return err
}

func (l *libFsx) read(h int, p []byte, off int64) (int, error) {
	f, err := l.file(h)
	if err != nil {
		return 0, err
	}
	return f.ReadAt(p, off)
}

func (l *libFsx) truncate(h int, size int64) error {
	f, err := l.file(h)
	if err == nil {
		err = f.Truncate(size)
	}
	return err
}

func (l *libFsx) fsync(h int) error {
	if _, err := l.file(h); err != nil {
		return err
	}
	err := l.tx.Commit(l.ctx)
	l.tx, l.f = nil, nil
	return err
}

func (l *libFsx) reopen(h int) error {
	f, err := l.file(h)
	if err != nil {
		return err
	}
	l.f = nil
	if err := f.Close(); err != nil {
		return err
	}
	_, err = l.file(h)
	return err
}

// reopenAll ends the transaction (committing it) and opens a new one.
func (l *libFsx) reopenAll() error {
	if l.tx == nil {
		return nil
	}
	err := l.tx.Commit(l.ctx)
	l.tx, l.f = nil, nil
	return err
}

func (l *libFsx) mmapRead(int, int) ([]byte, bool, error) { return nil, false, nil }

func (l *libFsx) mmapWrite(int, []byte, int64, int) (bool, error) { return false, nil }

func (l *libFsx) contents(fresh bool) (int64, []byte, error) {
	f, err := l.file(l.cur)
	if err != nil {
		return 0, nil, err
	}
	size := f.Size()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, size+1))
	if err != nil {
		return 0, nil, err
	}
	if fresh {
		// Committed, then read in a transaction of its own.
		if err := l.fsync(l.cur); err != nil {
			return 0, nil, fmt.Errorf("commit: %w", err)
		}
		again := testkit.ReadWhole(l.t, l.cl, l.path)
		if !bytes.Equal(again, b) {
			return 0, nil, fmt.Errorf("another transaction reads other bytes than were committed: %s", describeDiff(again, b))
		}
	}
	return size, b, nil
}

func (l *libFsx) committed() ([]byte, error) {
	if l.tx != nil {
		return nil, fmt.Errorf("the transaction is still open")
	}
	return testkit.ReadWhole(l.t, l.cl, l.path), nil
}

func (l *libFsx) close() error {
	if l.tx == nil {
		return nil
	}
	return l.tx.Commit(l.ctx)
}
