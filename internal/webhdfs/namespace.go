package webhdfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

const rootIno = 1

// located is a path looked up for a caller.
type located struct {
	path    string
	dir     client.FileInfo // the parent directory (the root for "/")
	name    string          // the last name ("" for the root)
	fi      client.FileInfo // the file, unless missing
	missing bool            // the parent exists, the last name does not
}

// exists returns an error unless the file was found.
func (l located) exists() error {
	if l.missing {
		return missingf("File does not exist: %s", l.path)
	}
	return nil
}

// locate looks p up in tx for who, name by name from the root, checking
// search permission on every directory on the way as the namenode does
// for a path of its own clients. A final symbolic link is not followed;
// one in the middle of the path is refused.
func locate(ctx context.Context, tx *client.Txn, who caller, p string) (located, error) {
	cur, err := tx.StatInode(ctx, rootIno)
	if err != nil {
		return located{}, err
	}
	names := components(p)
	l := located{path: p, dir: cur, fi: cur}
	for i, name := range names {
		here := "/" + strings.Join(names[:i], "/")
		if cur.Type != client.TypeDir {
			return located{}, excParentNotDir.errorf("%s: parent path %s is not a directory", p, here)
		}
		if !who.may(cur, permSearch) {
			return located{}, denied(who, "EXECUTE", here, cur)
		}
		next, err := clientx.At(tx).LookupAt(ctx, cur.Ino, name)
		last := i == len(names)-1
		switch {
		case last && errors.Is(err, client.ErrNotFound):
			return located{path: p, dir: cur, name: name, missing: true}, nil
		case errors.Is(err, client.ErrNotFound):
			return located{}, missingf("File does not exist: %s (no %s)", p, path.Join(here, name))
		case err != nil:
			return located{}, fmt.Errorf("%s: %w", p, err)
		case !last && next.Type == client.TypeSymlink:
			return located{}, excUnsupported.errorf("%s: the gateway does not follow the symbolic link %s in the middle of a path", p, path.Join(here, name))
		}
		l = located{path: p, dir: cur, name: name, fi: next}
		cur = next
	}
	return l, nil
}

// locateExisting is locate, with a missing file an error (FileNotFound).
func locateExisting(ctx context.Context, tx *client.Txn, who caller, p string) (located, error) {
	l, err := locate(ctx, tx, who, p)
	if err == nil {
		err = l.exists()
	}
	return l, err
}

// locateFile looks up the regular file at p, on which who must have the
// perm bits.
func locateFile(ctx context.Context, tx *client.Txn, who caller, p string, perm uint32) (located, error) {
	l, err := locateExisting(ctx, tx, who, p)
	if err != nil {
		return l, err
	}
	if l.fi.Type != client.TypeFile {
		return l, excNotFound.errorf("Path is not a file: %s", p)
	}
	return l, need(who, l.fi, perm, p)
}

// denied is the AccessControlException for who lacking access on the
// file at p, in the words of HDFS's permission checker.
func denied(who caller, access, p string, a client.FileInfo) error {
	return excAccess.errorf("Permission denied: user=%s, access=%s, inode=\"%s\":%s:%s:%s",
		who.user, access, p, a.User, a.Group, modeString(a))
}

func modeString(a client.FileInfo) string {
	t := "-"
	switch a.Type {
	case client.TypeDir:
		t = "d"
	case client.TypeSymlink:
		t = "l"
	}
	return t + a.Mode.Perm().String()[1:]
}

// need checks that who has the want bits on the file at p.
func need(who caller, a client.FileInfo, want uint32, p string) error {
	if who.may(a, want) {
		return nil
	}
	var access []string
	for _, b := range []struct {
		bit  uint32
		name string
	}{{permRead, "READ"}, {permWrite, "WRITE"}, {permSearch, "EXECUTE"}} {
		if want&b.bit != 0 {
			access = append(access, b.name)
		}
	}
	return denied(who, strings.Join(access, "_"), p, a)
}

// mayRemove checks that who may remove (or rename away) the entry for
// child in directory dir: write and search permission on dir, and in a
// sticky directory ownership of dir or of the entry, as the namenode
// checks.
func mayRemove(who caller, dir, child client.FileInfo, dirPath, childPath string) error {
	if err := need(who, dir, permWrite|permSearch, dirPath); err != nil {
		return err
	}
	if dir.Mode&fs.ModeSticky != 0 && !who.owns(dir) && !who.owns(child) {
		return denied(who, "WRITE", childPath+" (sticky directory "+dirPath+")", child)
	}
	return nil
}

// txn runs fn in one transaction committed with the request (again, from
// the start, if it conflicts with another transaction).
func (g *Gateway) txn(rq *request, fn func(ctx context.Context, tx *client.Txn) error) error {
	return g.c.Txn(rq.ctx, func(ctx context.Context, tx *client.Txn) error {
		clientx.CreateAs(tx, rq.who.user, rq.who.group())
		return fn(ctx, tx)
	})
}

// readTxn runs fn in a transaction that is aborted afterwards (it only
// reads), again while it conflicts with another transaction and fn says
// it may be run again.
func (g *Gateway) readTxn(rq *request, fn func(ctx context.Context, tx *client.Txn) (again bool, err error)) error {
	delay := 100 * time.Microsecond
	for attempt := 0; ; attempt++ {
		tx := g.c.Begin()
		again, err := fn(rq.ctx, tx)
		tx.Abort(context.Background())
		if !errors.Is(err, client.ErrConflict) || !again || attempt == 100 {
			return err
		}
		select {
		case <-rq.ctx.Done():
			return rq.ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

func wrapPath(p string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", p, err)
}
