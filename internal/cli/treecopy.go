// Copying directory trees in and out: put -r, get -r.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/plasmafs/plasma/client"
)

// treeEntry is one thing of a tree being copied: its path relative to the
// tree's top ("." for the top), what it is, and for a file its size, for a
// symbolic link its target.
type treeEntry struct {
	rel    string
	kind   client.FileType
	mode   fs.FileMode
	size   int64
	target string
}

// treeBytes is the sum of the sizes of the files of a tree.
func treeBytes(es []treeEntry) (n int64) {
	for _, e := range es {
		n += e.size
	}
	return n
}

// putTree copies the local directory tree local into PlasmaFS: as dst, or
// into dst if that is a directory. The directories and symbolic links are
// made in one transaction, then every file is copied in a transaction of
// its own; one progress bar counts the bytes of all files.
func putTree(ctx context.Context, f *flags, local, dst string, opt client.CopyOptions, quiet bool) error {
	var es []treeEntry
	err := filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(local, p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := treeEntry{rel: filepath.ToSlash(rel), mode: fi.Mode()}
		switch {
		case d.IsDir():
			e.kind = client.TypeDir
		case fi.Mode().IsRegular():
			e.kind, e.size = client.TypeFile, fi.Size()
		case fi.Mode()&fs.ModeSymlink != 0:
			e.kind = client.TypeSymlink
			if e.target, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			fmt.Fprintf(stderr, "plasma put: %s: skipped (not a regular file, directory or symbolic link)\n", escapeName(p))
			return nil
		}
		es = append(es, e)
		return nil
	})
	if err != nil {
		return err
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if dst, err = intoDir(ctx, c, dst, filepath.Base(filepath.Clean(local)), false); err != nil {
		return err
	}
	err = c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		for _, e := range es {
			p := path.Join(dst, e.rel)
			var err error
			switch e.kind {
			case client.TypeDir:
				_, err = tx.Mkdir(ctx, p, client.UnixMode(uint32(e.mode.Perm())))
			case client.TypeSymlink:
				_, err = tx.Symlink(ctx, e.target, p)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	total := treeBytes(es)
	bar := newProgress(total, "put", quiet)
	defer bar.finish()
	files := 0
	for _, e := range es {
		if e.kind != client.TypeFile {
			continue
		}
		if err := putTreeFile(ctx, c, filepath.Join(local, filepath.FromSlash(e.rel)), path.Join(dst, e.rel), e.mode, opt, bar); err != nil {
			return err
		}
		files++
	}
	bar.finish()
	fmt.Fprintf(stdout, "Copied: %s -> %s (%d files, %d bytes)\n", escapeName(local), escapeName(dst), files, total)
	return nil
}

// putTreeFile copies one local file of a tree to dst.
func putTreeFile(ctx context.Context, c *client.Client, local, dst string, mode fs.FileMode, opt client.CopyOptions, bar *progress) error {
	lf, err := os.Open(local)
	if err != nil {
		return err
	}
	defer lf.Close()
	opt.Mode = client.UnixMode(uint32(mode.Perm()))
	_, err = c.CopyIn(ctx, io.TeeReader(lf, bar), dst, opt)
	return err
}

// getTree copies the PlasmaFS directory tree src (read in tx) to the local
// directory dst: as dst, or into dst if that is a directory. Every file is
// written as get writes one (under a temporary name, renamed when
// complete); one progress bar counts the bytes of all files.
func getTree(ctx context.Context, tx *client.Txn, src, dst string, quiet bool) error {
	var es []treeEntry
	var walk func(rel string) error
	walk = func(rel string) error {
		p := path.Join(src, rel)
		fi, err := tx.Lstat(ctx, p)
		if err != nil {
			return err
		}
		e := treeEntry{rel: rel, kind: fi.Type, mode: fi.Mode, target: fi.Target}
		switch fi.Type {
		case client.TypeFile:
			e.size = fi.Size
		case client.TypeDir, client.TypeSymlink:
		default:
			fmt.Fprintf(stderr, "plasma get: %s: skipped (not a regular file, directory or symbolic link)\n", escapeName(p))
			return nil
		}
		es = append(es, e)
		if fi.Type != client.TypeDir {
			return nil
		}
		ents, err := tx.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		for _, d := range ents {
			if err := walk(path.Join(rel, d.Name)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return err
	}
	if st, err := os.Stat(dst); err == nil && st.IsDir() {
		dst = filepath.Join(dst, path.Base(path.Clean(src)))
	}
	total := treeBytes(es)
	bar := newProgress(total, "get", quiet)
	defer bar.finish()
	files := 0
	for _, e := range es {
		lp := filepath.Join(dst, filepath.FromSlash(e.rel))
		var err error
		switch e.kind {
		case client.TypeDir:
			// Writable by its owner while the copy fills it.
			if err = os.Mkdir(lp, e.mode.Perm()|0o700); errors.Is(err, fs.ErrExist) {
				err = nil
			}
		case client.TypeSymlink:
			err = os.Symlink(e.target, lp)
		case client.TypeFile:
			var sf *client.File
			if sf, err = tx.Open(ctx, path.Join(src, e.rel)); err == nil {
				err = getToFile(ctx, sf, lp, bar)
				files++
			}
		}
		if err != nil {
			return err
		}
	}
	bar.finish()
	fmt.Fprintf(stdout, "Copied: %s -> %s (%d files, %d bytes)\n", escapeName(src), escapeName(dst), files, total)
	return nil
}
