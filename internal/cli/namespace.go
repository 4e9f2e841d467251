// Changing the namespace: mkdir, create, rm, mv, ln, cp, chmod, chown.

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/plasmafs/plasma/client"
)

func cmdMkdir(ctx context.Context, args []string) error {
	f := newFlags("mkdir", "[-p] /dir...", "Create directories.", true)
	parents := f.Bool("p", false, "create missing parents; no error if the directory exists")
	mode := f.String("mode", "755", "permission bits (octal)")
	return withClient(ctx, f, args, 1, -1, func(c *client.Client) error {
		m, err := strconv.ParseUint(*mode, 8, 32)
		if err != nil || m > 0o7777 {
			return usagef("bad mode %q", *mode)
		}
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for _, p := range f.pos {
				var err error
				if *parents {
					_, err = tx.MkdirAll(ctx, p, client.UnixMode(uint32(m)))
				} else {
					_, err = tx.Mkdir(ctx, p, client.UnixMode(uint32(m)))
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func cmdCreate(ctx context.Context, args []string) error {
	f := newFlags("create", "[-rep N] /path...", "Create new, empty files (they must not exist).", true)
	rep := f.intRange("rep", 0, 0, client.MaxReplication, "replication (0: cluster default)")
	return withClient(ctx, f, args, 1, -1, func(c *client.Client) error {
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for _, p := range f.pos {
				if _, err := tx.Create(ctx, p, client.CreateOptions{Rep: *rep}); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func cmdRm(ctx context.Context, args []string) error {
	f := newFlags("rm", "[-r] /path|glob...", "Remove files; with -r, directories and their contents.", true)
	recursive := f.Bool("r", false, "remove directories recursively")
	return withClient(ctx, f, args, 1, -1, func(c *client.Client) error {
		paths, err := expand(ctx, c, f.pos)
		if err != nil {
			return err
		}
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for _, p := range paths {
				if err := removePath(ctx, tx, p, *recursive); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func removePath(ctx context.Context, tx *client.Txn, p string, recursive bool) error {
	fi, err := tx.Lstat(ctx, p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return tx.Unlink(ctx, p)
	}
	if !recursive {
		return fmt.Errorf("%s: is a directory (use rm -r)", p)
	}
	ents, err := tx.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := removePath(ctx, tx, path.Join(p, e.Name), true); err != nil {
			return err
		}
	}
	return tx.Rmdir(ctx, p)
}

func cmdMv(ctx context.Context, args []string) error {
	f := newFlags("mv", "/from /to", "Rename or move a file or directory. If /to is a directory, move into it.", true)
	return withClient(ctx, f, args, 2, 2, func(c *client.Client) error {
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			to := f.pos[1]
			if fi, err := tx.Lookup(ctx, to); err == nil && fi.IsDir() {
				to = path.Join(to, path.Base(f.pos[0]))
			}
			return tx.Rename(ctx, f.pos[0], to)
		})
	})
}

func cmdLn(ctx context.Context, args []string) error {
	f := newFlags("ln", "[-s] TARGET /linkpath", "Make a hard link, or with -s a symbolic link.", true)
	sym := f.Bool("s", false, "symbolic link")
	return withClient(ctx, f, args, 2, 2, func(c *client.Client) error {
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			if *sym {
				_, err := tx.Symlink(ctx, f.pos[0], f.pos[1])
				return err
			}
			return tx.Link(ctx, f.pos[0], f.pos[1])
		})
	})
}

func cmdCp(ctx context.Context, args []string) error {
	f := newFlags("cp", "[-rep N] [file::|plasma::]FROM [file::|plasma::]TO", "Copy a file within PlasmaFS (the copy is new; TO must not exist; if TO is a\ndirectory, the copy goes into it), or between PlasmaFS and local files: a path\nprefixed file:: is local (file::/tmp/x), one prefixed plasma:: or not at all is in\nPlasmaFS. A local destination is replaced whole or not at all.", true)
	rep := f.intRange("rep", 0, 0, client.MaxReplication, "replication of the copy (0: same as the source)")
	var quiet bool
	f.BoolVar(&quiet, "q", false, "no progress bar")
	return withClient(ctx, f, args, 2, 2, func(c *client.Client) error {
		trees, err := splitTreeArgs(f.pos)
		if err != nil {
			return err
		}
		if trees[0].local || trees[1].local {
			return copyAcross(ctx, c, trees[0], trees[1], *rep, quiet)
		}
		f.pos[0], f.pos[1] = trees[0].path, trees[1].path
		tx := c.Begin()
		defer tx.Abort(ctx)
		src, err := tx.Open(ctx, f.pos[0])
		if errors.Is(err, client.ErrNotFound) && localExists(f.pos[0]) {
			return fmt.Errorf("%w (without file::, cp copies within PlasmaFS; to copy the local file %s in, use 'plasma cp file::%[2]s %[3]s' or 'plasma put %[2]s %[3]s')", err, f.pos[0], f.pos[1])
		}
		if err != nil {
			return err
		}
		dst, err := copyTarget(ctx, tx, f.pos[0], f.pos[1])
		if err != nil {
			return err
		}
		r := *rep
		if r == 0 {
			fi, err := tx.StatInode(ctx, src.Ino())
			if err != nil {
				return err
			}
			r = fi.Rep
		}
		bar := newProgress(src.Size(), "cp", quiet)
		pr, pw := io.Pipe()
		go func() { _, err := src.WriteTo(pw); pw.CloseWithError(err) }()
		_, err = c.CopyIn(ctx, io.TeeReader(pr, bar), dst, client.CopyOptions{Rep: r, CommitEvery: 1 << 30})
		pr.CloseWithError(err)
		bar.finish()
		return err
	})
}

// copyTarget returns where cp puts a copy of src given dst: into dst if
// it is a directory. A dst whose directory is missing in PlasmaFS but
// exists on this machine is an error that says how to copy to a local file.
func copyTarget(ctx context.Context, tx *client.Txn, src, dst string) (string, error) {
	fi, err := tx.Lookup(ctx, dst)
	if err == nil && fi.IsDir() {
		return path.Join(dst, path.Base(src)), nil
	}
	if !errors.Is(err, client.ErrNotFound) {
		return dst, nil
	}
	dir := path.Dir(dst)
	if _, err := tx.Lookup(ctx, dir); errors.Is(err, client.ErrNotFound) && localExists(dir) {
		return "", fmt.Errorf("%s: no directory %s in PlasmaFS (without file::, cp copies within PlasmaFS; to copy to the local file %[3]s, use 'plasma cp %[4]s file::%[3]s' or 'plasma get %[4]s %[3]s')", dst, dir, dst, src)
	}
	return dst, nil
}

// localExists reports whether p names something on this machine.
func localExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func cmdChmod(ctx context.Context, args []string) error {
	f := newFlags("chmod", "MODE /path...", "Change permission bits (octal MODE).", true)
	return withClient(ctx, f, args, 2, -1, func(c *client.Client) error {
		m, err := strconv.ParseUint(f.pos[0], 8, 32)
		if err != nil || m > 0o7777 {
			return usagef("bad mode %q (octal, e.g. 644)", f.pos[0])
		}
		mode := client.UnixMode(uint32(m))
		return forEachInode(ctx, c, f.pos[1:], client.SetAttr{Mode: &mode})
	})
}

func cmdChown(ctx context.Context, args []string) error {
	f := newFlags("chown", "USER[:GROUP] /path...", "Change owner (and group).", true)
	return withClient(ctx, f, args, 2, -1, func(c *client.Client) error {
		u, g, hasGroup := strings.Cut(f.pos[0], ":")
		var s client.SetAttr
		if u != "" {
			s.User = &u
		}
		if hasGroup && g != "" {
			s.Group = &g
		}
		if s.User == nil && s.Group == nil {
			return usagef("empty owner %q", f.pos[0])
		}
		return forEachInode(ctx, c, f.pos[1:], s)
	})
}

func forEachInode(ctx context.Context, c *client.Client, args []string, s client.SetAttr) error {
	paths, err := expand(ctx, c, args)
	if err != nil {
		return err
	}
	return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		for _, p := range paths {
			fi, err := tx.Lookup(ctx, p)
			if err != nil {
				return err
			}
			if _, err := tx.SetAttr(ctx, fi.Ino, s); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})
}
