package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/client"
)

// AppendOptions configure the small-append benchmark.
type AppendOptions struct {
	Dir    string // directory to append in (of a mount, or a reference filesystem)
	N      int    // appends
	Record int    // bytes per append (64 in issue 10)
	// Prefill: bytes the file holds (written and fsynced) before the
	// timed appends, so they go to a block that already holds much.
	Prefill int64
}

// Append measures what databases and logs do through a mount: a record
// appended to a file and fsynced, N times, one after another (1 process).
// The file is read back at the end and must hold exactly the records
// written, so a fast but lossy path cannot pass.
func Append(o AppendOptions) (*Report, error) {
	if o.Record <= 0 {
		o.Record = 64
	}
	rep := &Report{Bench: "append", Started: time.Now(), Params: fmt.Sprintf("n=%d record=%d prefill=%d dir=%s", o.N, o.Record, o.Prefill, o.Dir)}
	name := filepath.Join(o.Dir, "plasma-bench-append")
	os.Remove(name)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer os.Remove(name)
	rec := make([]byte, o.Record)
	want := sha256.New()
	if o.Prefill > 0 {
		pre := make([]byte, o.Prefill)
		fillRecord(pre, -1)
		if _, err := f.Write(pre); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: prefill: %w", name, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: fsync after the prefill: %w", name, err)
		}
		want.Write(pre)
	}
	start := time.Now()
	for i := 0; i < o.N; i++ {
		fillRecord(rec, i)
		if _, err := f.Write(rec); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: append %d: %w", name, i, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: fsync after append %d: %w", name, i, err)
		}
		want.Write(rec)
	}
	d := time.Since(start)
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("%s: close: %w", name, err)
	}
	got, n, err := hashFile(name)
	if err != nil {
		return nil, err
	}
	if total := o.Prefill + int64(o.N*o.Record); n != total || !bytes.Equal(got, want.Sum(nil)) {
		return nil, fmt.Errorf("%s: read back %d bytes that differ from the %d written", name, n, total)
	}
	what := fmt.Sprintf("%d-byte append + fsync", o.Record)
	if o.Prefill > 0 {
		what += fmt.Sprintf(" to a file of %d KiB", o.Prefill>>10)
	}
	rep.add(Result{Name: what, Unit: "ops/s", Ours: float64(o.N) / d.Seconds(),
		Note: fmt.Sprintf("%.0f µs each", d.Seconds()*1e6/float64(o.N))})
	return rep, nil
}

// fillRecord makes record i distinguishable from every other one.
func fillRecord(b []byte, i int) {
	for k := range b {
		b[k] = byte('a' + (i+k+26)%26)
	}
	if len(b) > 0 {
		b[len(b)-1] = '\n'
	}
}

func hashFile(name string) ([]byte, int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, 0, fmt.Errorf("read back %s: %w", name, err)
	}
	return h.Sum(nil), n, nil
}

// MountSeqOptions configure the sequential mount I/O benchmark.
type MountSeqOptions struct {
	Target   string // directory in a PlasmaFS mount
	Path     string // the PlasmaFS path of Target's directory, for the native reference
	Size     int64
	LocalDir string // where the local source and copies go
	Runs     int
	// ReadsOnly times only the reads: the file is written through the
	// mount and put once, untimed, and each pair's order alternates.
	ReadsOnly bool
}

// MountSeq measures a large file copied into a PlasmaFS mount and read
// back with 1 MiB writes and reads (as cp does), each right after the same
// by the native client (plasma put and get): the ratio is what the mount
// costs. Reads go to a new local file (both sides; the previous copy is
// removed first, so truncating it does not wait for its writeback); the
// file read through the mount is checked against the source once at the
// end. Before each read the
// mount's page cache of the file is dropped (posix_fadvise DONTNEED), so
// the bytes come through the mount; the datanodes' caches are as warm as
// for get.
func MountSeq(ctx context.Context, c *client.Client, o MountSeqOptions) (*Report, error) {
	rep := &Report{Bench: "mount-seq", Started: time.Now(), Params: fmt.Sprintf("size=%d runs=%d target=%s localdir=%s", o.Size, o.Runs, DescribeDir(o.Target), o.LocalDir)}
	src := filepath.Join(o.LocalDir, "plasma-bench-mount-src")
	if err := makeRandomFile(src, o.Size); err != nil {
		return nil, err
	}
	defer os.Remove(src)
	native := filepath.ToSlash(filepath.Join(o.Path, "plasma-bench-mount-put"))
	viaMount := filepath.Join(o.Target, "plasma-bench-mount-cp")
	pairs := newPairedRates(o.Size)
	put := func() error { return putFile(ctx, c, src, native) }
	dst := filepath.Join(o.LocalDir, "plasma-bench-mount-copy")
	defer os.Remove(dst)
	get := func() error {
		os.Remove(dst)
		lf, err := os.Create(dst)
		if err != nil {
			return err
		}
		defer lf.Close()
		return getTo(ctx, c, native, lf)
	}
	write := func() error { return copyFile(src, viaMount) }
	read := func() error {
		f, err := os.Open(viaMount)
		if err != nil {
			return err
		}
		defer f.Close()
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		os.Remove(dst)
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{f}, make([]byte, 1<<20))
		return err
	}
	wantSum, _, err := hashFile(src)
	if err != nil {
		return nil, err
	}
	if o.ReadsOnly {
		removeIfExists(ctx, c, native)
		os.Remove(viaMount)
		if err := put(); err != nil {
			return nil, err
		}
		if err := write(); err != nil {
			return nil, err
		}
	}
	for run := 0; run < o.Runs; run++ {
		if !o.ReadsOnly {
			removeIfExists(ctx, c, native)
			os.Remove(viaMount)
			if err := pairs.run("write", put, write); err != nil {
				return nil, err
			}
		}
		if err := pairs.runOrdered("read", o.ReadsOnly && run%2 == 1, get, read); err != nil {
			return nil, err
		}
	}
	// What comes out through the mount is what went in.
	if got, _, err := hashFile(viaMount); err != nil || !bytes.Equal(got, wantSum) {
		return nil, fmt.Errorf("%s read back through the mount differs from %s (%v)", viaMount, src, err)
	}
	removeIfExists(ctx, c, native)
	os.Remove(viaMount)
	for _, k := range []struct{ key, name, ref string }{
		{"write", "write through the FUSE mount (1 MiB writes, fsync)", "plasma put"},
		{"read", "read through the FUSE mount (1 MiB reads)", "plasma get"},
	} {
		if pairs.series[k.key] == nil {
			continue // not measured (ReadsOnly)
		}
		pairs.add(rep, k.key, Result{Name: k.name, RefName: k.ref, Note: "ratio: median of per-pair ratios (goal ≥ 0.80)"})
	}
	return rep, nil
}

// copyFile copies from to to with 1 MiB reads and writes and fsyncs the
// copy before it is closed (as the put it is compared with commits
// durably).
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, buf); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", from, to, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("fsync %s: %w", to, err)
	}
	return out.Close()
}
