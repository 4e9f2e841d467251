// Copying data in and out: put, get, cat.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"

	"github.com/plasmafs/plasma/client"
)

func cmdPut(ctx context.Context, args []string) error {
	f := newFlags("put", "[-rep N] [-r] LOCALFILE|-stdin /path", "Copy a local file into PlasmaFS. The file must not exist yet; if /path is a directory,\nthe file is put into it under its local name. With -r, a local directory tree (into\n/path/NAME if /path is a directory, else as /path; one transaction per file).\nLong copies commit every -commit-every bytes, so no transaction grows without bound.", true)
	rep := f.intRange("rep", 0, 0, client.MaxReplication, "replication (0: cluster default)")
	useStdin := f.Bool("stdin", false, "read the data from standard input")
	var every int64 = 1 << 30
	f.sizeRange(&every, "commit-every", 1<<20, 1<<50, "commit after this many bytes")
	var quiet bool
	f.BoolVar(&quiet, "q", false, "no progress bar (there is none when stderr is not a terminal)")
	recursive := f.Bool("r", false, "copy a local directory and everything under it")
	topology := topologyFlags(f)
	if err := f.parse(args); err != nil {
		return err
	}
	want := 2
	if *useStdin {
		want = 1
	}
	if len(f.pos) != want {
		return usagef("wrong number of arguments")
	}
	dst := f.pos[want-1]
	if st, err := os.Stat(f.pos[0]); err == nil && st.IsDir() && *recursive && !*useStdin {
		return putTree(ctx, f, f.pos[0], dst, client.CopyOptions{Rep: *rep, CommitEvery: every}, quiet)
	}
	var src io.Reader
	var size int64 = -1
	name := "stdin"
	if !*useStdin {
		name = f.pos[0]
		lf, err := os.Open(name)
		if err != nil {
			return err
		}
		defer lf.Close()
		st, err := lf.Stat()
		if err != nil {
			return err
		}
		if st.IsDir() {
			return fmt.Errorf("%s: is a directory (use put -r to copy the tree)", name)
		}
		size = st.Size()
		src = lf
	} else {
		src = os.Stdin
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	// Into an existing directory, as cp does.
	if dst, err = intoDir(ctx, c, dst, filepath.Base(name), *useStdin); err != nil {
		return err
	}
	bar := newProgress(size, "put", quiet)
	n, err := c.CopyIn(ctx, io.TeeReader(src, bar), dst, client.CopyOptions{Rep: *rep, CommitEvery: every, Topology: topology()})
	bar.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Copied: %s -> %s (%d bytes)\n", escapeName(name), escapeName(dst), n)
	return nil
}

func cmdGet(ctx context.Context, args []string) error {
	f := newFlags("get", "[-r] /path LOCALFILE", "Copy a PlasmaFS file to a local file ('-' for stdout); with -r a directory tree\n(into LOCALDIR/NAME if LOCALDIR exists, else as LOCALDIR).\nThe file is written under a temporary name beside LOCALFILE and renamed when it is\ncomplete: a failed or interrupted get leaves no partial file (and an existing\nLOCALFILE as it was).", true)
	var quiet bool
	f.BoolVar(&quiet, "q", false, "no progress bar (there is none when stderr is not a terminal)")
	recursive := f.Bool("r", false, "copy a directory and everything under it")
	return withClient(ctx, f, args, 2, 2, func(c *client.Client) error {
		// A read-only transaction: nothing to commit, so no retries.
		tx := c.Begin()
		defer tx.Abort(ctx)
		if fi, err := tx.Lstat(ctx, f.pos[0]); err == nil && fi.IsDir() && f.pos[1] != "-" {
			if !*recursive {
				return fmt.Errorf("%s: is a directory (use get -r to copy the tree)", f.pos[0])
			}
			return getTree(ctx, tx, f.pos[0], f.pos[1], quiet)
		}
		src, err := tx.Open(ctx, f.pos[0])
		if err != nil {
			return err
		}
		if f.pos[1] == "-" {
			bar := newProgress(src.Size(), "get", quiet)
			_, err = src.WriteTo(io.MultiWriter(stdout, bar))
			bar.finish()
			return err
		}
		bar := newProgress(src.Size(), "get", quiet)
		defer bar.finish()
		return getToFile(ctx, src, f.pos[1], bar)
	})
}

// intoDir returns where a copy to dst goes: dst/name if dst is an existing
// directory (as cp puts a file into a directory), else dst. Without a name
// (stdin), a directory is an error.
func intoDir(ctx context.Context, c *client.Client, dst, name string, noName bool) (string, error) {
	tx := c.Begin()
	defer tx.Abort(ctx)
	fi, err := tx.Lookup(ctx, dst)
	if err != nil || !fi.IsDir() {
		return dst, nil // the copy says what is wrong, if anything
	}
	if noName {
		return "", fmt.Errorf("%s: is a directory (name the file to create in it)", dst)
	}
	return path.Join(dst, name), nil
}

// getToFile copies src to the local file dst atomically: into a new
// temporary file in dst's directory, synced, then renamed over dst. On an
// error, or when ctx ends (Ctrl-C), the temporary file is removed and dst
// is left as it was. The bytes copied go to bar too.
func getToFile(ctx context.Context, src *client.File, dst string, bar *progress) error {
	// Write through a symbolic link to where it points, as os.Create would.
	target := dst
	if fi, err := os.Lstat(dst); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if t, err := filepath.EvalSymlinks(dst); err == nil {
			target = t
		}
	}
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: is a directory", dst)
	}
	if special, err := openSpecial(target); err != nil || special != nil {
		if err != nil {
			return err
		}
		return writeSpecial(ctx, special, dst, func(w io.Writer) error {
			_, err := src.WriteTo(io.MultiWriter(w, bar))
			return err
		})
	}
	tmp, err := createTemp(target)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	copied := make(chan error, 1)
	go func() {
		_, err := src.WriteTo(io.MultiWriter(tmp, bar))
		if err == nil {
			err = tmp.Sync()
		}
		copied <- err
	}()
	select {
	case err = <-copied:
	case <-ctx.Done():
		// Interrupted: do not wait for a read that may be stuck on an
		// unresponsive datanode; the deferred cleanup removes the
		// temporary file (later writes to it fail: it is closed).
		return fmt.Errorf("%s: interrupted, nothing written: %w", dst, context.Cause(ctx))
	}
	if err != nil {
		return fmt.Errorf("%w (%s not written)", err, dst)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return err
	}
	done = true
	// Make the rename itself durable.
	if d, err := os.Open(filepath.Dir(target)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// createTemp creates a new, hidden file beside dst, with the permissions
// os.Create would give dst (0666 less the umask).
// openSpecial opens dst for writing when it exists and is not a regular
// file (a device such as /dev/null, a FIFO, a terminal): such a file is
// written into, never replaced. A temporary file renamed over /dev/null
// would leave a plain file where every program expects the device. It
// returns nil for a regular or missing file.
func openSpecial(dst string) (*os.File, error) {
	fi, err := os.Stat(dst)
	if err != nil || fi.Mode().IsRegular() || fi.IsDir() {
		return nil, nil
	}
	f, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dst, err)
	}
	return f, nil
}

// writeSpecial writes to f (from openSpecial) with write, closing it; an
// interruption (ctx) stops waiting for the copy.
func writeSpecial(ctx context.Context, f *os.File, dst string, write func(io.Writer) error) error {
	copied := make(chan error, 1)
	go func() { copied <- write(f) }()
	var err error
	select {
	case err = <-copied:
	case <-ctx.Done():
		err = fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	return nil
}

func createTemp(dst string) (*os.File, error) {
	dir, base := filepath.Split(dst)
	var err error
	for i := 0; i < 100; i++ {
		name := filepath.Join(dir, fmt.Sprintf(".%s.plasma-get-%d", base, rand.Uint32()))
		var tf *os.File
		tf, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			return tf, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	// Name what the user gave, not the temporary file beside it.
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return nil, fmt.Errorf("%s: cannot create it in %s: %w", dst, filepath.Clean(dir+"."), pe.Err)
	}
	return nil, err
}

func cmdCat(ctx context.Context, args []string) error {
	f := newFlags("cat", "/path...", "Write PlasmaFS files to standard output.", true)
	return withPaths(ctx, f, args, func(tx *client.Txn, paths []string) error {
		for _, p := range paths {
			src, err := tx.Open(ctx, p)
			if err != nil {
				return err
			}
			if _, err := src.WriteTo(stdout); err != nil {
				return err
			}
		}
		return nil
	})
}
