package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/nfsbridge"
	"github.com/plasmafs/plasma/internal/vfs"
)

// NFSOptions configure the NFS bridge benchmark.
type NFSOptions struct {
	Size     int64  // file size
	LocalDir string // where the local source and copies go
	Runs     int    // repetitions; medians of per-pair ratios are reported
}

// NFS measures a large file copied into and out of PlasmaFS through the
// NFSv3 bridge by libnfs's nfs-cp (a client nobody here wrote), each right
// after the same copy by the native client (plasma put and get), which is
// the reference: the ratio is what the bridge costs. The bridge runs in
// this process, as 'plasma nfs' would beside the client.
func NFS(ctx context.Context, c *client.Client, o NFSOptions) (*Report, error) {
	if _, err := exec.LookPath("nfs-cp"); err != nil {
		return nil, fmt.Errorf("nfs-cp not found: install libnfs-utils (apt-get install -y libnfs-utils)")
	}
	rep := &Report{Bench: "nfs", Started: time.Now(), Params: fmt.Sprintf("size=%d runs=%d localdir=%s", o.Size, o.Runs, o.LocalDir)}
	src := filepath.Join(o.LocalDir, "plasma-bench-nfs-src")
	if err := makeRandomFile(src, o.Size); err != nil {
		return nil, err
	}
	defer os.Remove(src)
	dst := filepath.Join(o.LocalDir, "plasma-bench-nfs-copy")
	defer os.Remove(dst)

	v := vfs.New(c, vfs.Options{Sync: true, WriteBack: true})
	defer v.Close()
	// nfs-cp runs as the invoking user, often root: serve it as such.
	b, err := nfsbridge.New(ctx, v, "/", nfsbridge.Options{NoRootSquash: true})
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	served := make(chan error, 1)
	go func() { served <- b.Serve(l) }()
	defer func() { l.Close(); <-served }()
	port := l.Addr().(*net.TCPAddr).Port
	url := func(name string) string {
		return fmt.Sprintf("nfs://127.0.0.1/%s?nfsport=%d&mountport=%d", name, port, port)
	}
	nfsCp := func(from, to string) error {
		os.Remove(dst)
		out, err := exec.CommandContext(ctx, "nfs-cp", from, to).CombinedOutput()
		if err != nil {
			return fmt.Errorf("nfs-cp %s %s: %v: %s", from, to, err, out)
		}
		return nil
	}
	pairs := newPairedRates(o.Size)
	const native, viaNFS = "/plasma-bench-nfs-put", "/plasma-bench-nfs-cp"
	for run := 0; run < o.Runs; run++ {
		removeIfExists(ctx, c, native)
		removeIfExists(ctx, c, viaNFS)
		put := func() error { return putFile(ctx, c, src, native) }
		get := func() error {
			os.Remove(dst)
			lf, err := os.Create(dst)
			if err != nil {
				return err
			}
			defer lf.Close()
			return getTo(ctx, c, native, lf)
		}
		if err := pairs.run("write", put, func() error { return nfsCp(src, url("/"+viaNFS)) }); err != nil {
			return nil, err
		}
		if err := pairs.run("read", get, func() error { return nfsCp(url("/"+viaNFS), dst) }); err != nil {
			return nil, err
		}
	}
	removeIfExists(ctx, c, native)
	removeIfExists(ctx, c, viaNFS)
	for _, k := range []struct{ key, name, ref string }{
		{"write", "nfs-cp into the bridge", "plasma put"},
		{"read", "nfs-cp out of the bridge", "plasma get"},
	} {
		pairs.add(rep, k.key, Result{Name: k.name, RefName: k.ref, Note: "ratio: median of per-pair ratios (goal ≥ 0.60)"})
	}
	return rep, nil
}
