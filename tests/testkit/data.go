package testkit

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// CommitMany commits n directory creations from each of w clients, durable
// or async, and returns the names acknowledged.
func CommitMany(t *testing.T, c *clustertest.Procs, tag string, w, n int, d clientx.Durability) []string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		cl := c.Client(client.Config{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for j := 0; j < n; j++ {
				name := fmt.Sprintf("%s%d-%04d-", tag, i, j)
				// Long names make the log fill (and start over) quickly.
				name += fmt.Sprintf("%0200d", j)
				if _, err := clientx.At(clientx.Auto(cl, d)).MkdirAt(ctx, 1, name, 0); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked = append(acked, name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked
}

// CheckPresent fails the test unless each of names is in the root
// directory.
func CheckPresent(t *testing.T, c *clustertest.Procs, names []string) {
	t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	tx := cl.Begin()
	defer tx.Abort(context.Background())
	ents, err := tx.ReadDir(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, e := range ents {
		have[e.Name] = true
	}
	missing := 0
	for _, n := range names {
		if !have[n] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged commits missing", missing, len(names))
	}
}

// CRC32C is the Castagnoli CRC32 of b.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// DiskRuns merges a block list's extents into the runs they make on the
// datanodes: extents end where allocations end (each carries its
// allocation's generation), runs where the blocks stop being contiguous.
func DiskRuns(xs []client.Extent) []client.Extent {
	var out []client.Extent
	for _, x := range xs {
		if n := len(out); n > 0 {
			l := &out[n-1]
			same := l.Index+uint64(l.Count) == x.Index && len(l.Replicas) == len(x.Replicas)
			for i := 0; same && i < len(x.Replicas); i++ {
				same = l.Replicas[i].Datanode == x.Replicas[i].Datanode && l.Replicas[i].Start+uint64(l.Count) == x.Replicas[i].Start
			}
			if same {
				l.Count += x.Count
				continue
			}
		}
		x.Replicas = append([]client.Replica(nil), x.Replicas...)
		out = append(out, x)
	}
	return out
}

// WriteRep2 creates path with two replicas holding data, in one
// transaction.
func WriteRep2(t *testing.T, cl *client.Client, path string, data []byte) {
	t.Helper()
	MustOK(t, "create "+path, cl.Txn(context.Background(), func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.CreateFile(ctx, path, client.CreateOptions{Rep: 2})
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		return err
	}))
}

// AppendTo writes data at the end of path in one transaction, or only
// flushes it and aborts when abort is set.
func AppendTo(t *testing.T, cl *client.Client, path string, data []byte, abort bool) {
	t.Helper()
	ctx := context.Background()
	tx := cl.Begin()
	f, err := tx.Open(ctx, path)
	MustOK(t, "open", err)
	_, err = f.WriteAt(data, f.Size())
	MustOK(t, "append", err)
	if abort {
		MustOK(t, "flush", f.Flush(ctx))
		MustOK(t, "abort", tx.Abort(ctx))
		return
	}
	MustOK(t, "commit", tx.Commit(ctx))
}

// ReadWhole reads the whole file path in one transaction.
func ReadWhole(t *testing.T, cl *client.Client, path string) []byte {
	t.Helper()
	var got []byte
	MustOK(t, "read "+path, cl.Txn(context.Background(), func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, path)
		if err != nil {
			return err
		}
		got, err = io.ReadAll(f)
		return err
	}))
	return got
}

// FsckClean fails the test if fsck reports any problem.
func FsckClean(t *testing.T, cl *client.Client) {
	t.Helper()
	rep, err := cl.Fsck(context.Background())
	MustOK(t, "fsck", err)
	if len(rep.Problems) > 0 {
		t.Fatalf("fsck: %q", rep.Problems)
	}
}

// MustOK fails the test with what if err is not nil.
func MustOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// SeededBytes returns n pseudo-random bytes, the same for the same seed.
func SeededBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// RandomBytes returns n random bytes.
func RandomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := crand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// WriteFile writes data to path with rep replicas (CopyIn).
func WriteFile(t *testing.T, cl *client.Client, path string, data []byte, rep int) {
	t.Helper()
	if _, err := cl.CopyIn(context.Background(), bytes.NewReader(data), path, client.CopyOptions{Rep: rep}); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// ReadFile reads the whole file path.
func ReadFile(t *testing.T, cl *client.Client, path string) []byte {
	t.Helper()
	ctx := context.Background()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	var b bytes.Buffer
	if _, err := io.Copy(&b, f); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b.Bytes()
}

// Ptr returns a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// ReadAllFiles reads every file with a new client (short-circuit or not) and
// reports files whose bytes differ; errors are returned per file.
func ReadAllFiles(t *testing.T, c *clustertest.Procs, files map[string][]byte, noShortCircuit bool) map[string]error {
	t.Helper()
	ctx := context.Background()
	cl := c.Client(client.Config{NoShortCircuit: noShortCircuit})
	defer cl.Close()
	errs := map[string]error{}
	for p, want := range files {
		var got []byte
		err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, p)
			if err != nil {
				return err
			}
			got, err = io.ReadAll(f)
			return err
		})
		if err != nil {
			errs[p] = err
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s (no short-circuit %v): read %d bytes, %d differ from the %d written: wrong bytes returned",
				p, noShortCircuit, len(got), CountDiff(got, want), len(want))
		}
	}
	return errs
}

// CountDiff counts the bytes of a that differ from b (or that b lacks).
func CountDiff(a, b []byte) int {
	n := 0
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			n++
		}
	}
	return n
}
