package webhdfs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// mkdirs creates the directory p and its missing parents for who (with
// mode), as HDFS's mkdirs does, and returns the directory.
func mkdirs(ctx context.Context, tx *client.Txn, who caller, p string, mode uint32) (client.FileInfo, error) {
	cur, err := tx.StatInode(ctx, rootIno)
	if err != nil {
		return client.FileInfo{}, err
	}
	names := components(p)
	for i, name := range names {
		here := "/" + strings.Join(names[:i], "/")
		if cur.Type != client.TypeDir {
			return client.FileInfo{}, excParentNotDir.errorf("%s: parent path %s is not a directory", p, here)
		}
		if err := need(who, cur, permSearch, here); err != nil {
			return client.FileInfo{}, err
		}
		next, err := clientx.At(tx).LookupAt(ctx, cur.Ino, name)
		if errors.Is(err, client.ErrNotFound) {
			if err := need(who, cur, permWrite|permSearch, here); err != nil {
				return client.FileInfo{}, err
			}
			next, err = clientx.At(tx).MkdirAt(ctx, cur.Ino, name, client.UnixMode(mode))
			if err == nil && mode == 0 { // MkdirAt takes 0 for the default 0755
				next, err = zeroMode(ctx, tx, next)
			}
		}
		if err != nil {
			return client.FileInfo{}, fmt.Errorf("%s: %w", path.Join(here, name), err)
		}
		if next.Type == client.TypeSymlink && i < len(names)-1 {
			return client.FileInfo{}, excUnsupported.errorf("%s: the gateway does not follow the symbolic link %s in the middle of a path", p, path.Join(here, name))
		}
		cur = next
	}
	if cur.Type != client.TypeDir {
		return client.FileInfo{}, excExists.errorf("%s exists and is not a directory", p)
	}
	return cur, nil
}

// zeroMode takes every permission bit of a file just created with mode 0
// (which creation takes for the default).
func zeroMode(ctx context.Context, tx *client.Txn, fi client.FileInfo) (client.FileInfo, error) {
	m := client.UnixMode(client.UnixBits(fi.Mode) &^ 0o1777)
	return tx.SetAttr(ctx, fi.Ino, client.SetAttr{Mode: &m})
}

func (g *Gateway) mkdirs(rq *request) error {
	mode, err := rq.q.permParam(0o755)
	if err != nil {
		return err
	}
	err = g.txn(rq, func(ctx context.Context, tx *client.Txn) error {
		_, err := mkdirs(ctx, tx, rq.who, rq.path, mode)
		return err
	})
	if err != nil {
		return err
	}
	writeBool(rq.w, true)
	return nil
}

// rename moves a file as HDFS's (old) rename does: into the destination
// if that is a directory; false, not an error, when the source is missing
// or the destination taken.
func (g *Gateway) rename(rq *request) error {
	dst, ok := rq.q["destination"]
	if !ok || !strings.HasPrefix(dst, "/") {
		return excArgument.errorf("RENAME needs destination=/absolute/path, got %q", dst)
	}
	dst, err := cleanPath(dst)
	if err != nil {
		return err
	}
	var done bool
	err = g.txn(rq, func(ctx context.Context, tx *client.Txn) error {
		done = false
		src, err := locate(ctx, tx, rq.who, rq.path)
		if err != nil || src.missing || rq.path == "/" {
			return err
		}
		to, err := locate(ctx, tx, rq.who, dst)
		if err != nil {
			if errors.Is(err, client.ErrNotFound) {
				return nil // no parent: false, as HDFS
			}
			return err
		}
		if dst == rq.path {
			done = true
			return nil
		}
		if !to.missing {
			if to.fi.Type != client.TypeDir {
				return nil
			}
			// Into the directory, under the source's name.
			p := path.Join(dst, src.name)
			if to, err = locate(ctx, tx, rq.who, p); err != nil || !to.missing {
				return err
			}
		}
		if to.dir.Type != client.TypeDir {
			return nil
		}
		if err := mayRemove(rq.who, src.dir, src.fi, path.Dir(rq.path), rq.path); err != nil {
			return err
		}
		if err := need(rq.who, to.dir, permWrite|permSearch, path.Dir(to.path)); err != nil {
			return err
		}
		if err := clientx.At(tx).RenameAt(ctx, src.dir.Ino, src.name, to.dir.Ino, to.name, clientx.RenameOptions{NoReplace: true}); err != nil {
			return fmt.Errorf("rename %s to %s: %w", rq.path, to.path, err)
		}
		done = true
		return nil
	})
	if err != nil {
		return err
	}
	writeBool(rq.w, done)
	return nil
}

// delete removes a file, or a directory (with recursive, and everything
// in it, in the one transaction): false, not an error, if there is
// nothing to delete.
func (g *Gateway) delete(rq *request) error {
	recursive, err := rq.q.boolParam("recursive", false)
	if err != nil {
		return err
	}
	var done bool
	err = g.txn(rq, func(ctx context.Context, tx *client.Txn) error {
		done = false
		l, err := locate(ctx, tx, rq.who, rq.path)
		if err != nil || l.missing || rq.path == "/" {
			return err
		}
		if err := mayRemove(rq.who, l.dir, l.fi, path.Dir(rq.path), rq.path); err != nil {
			return err
		}
		if err := removeEntry(ctx, tx, rq.who, l.dir, l.name, l.fi, rq.path, recursive); err != nil {
			return err
		}
		done = true
		return nil
	})
	if err != nil {
		return err
	}
	writeBool(rq.w, done)
	return nil
}

// removeEntry removes name (attributes fi, path p) from dir; a directory
// with what it holds if recursive, each name checked as for the caller's
// own removal (read, write and search permission on every directory
// emptied, as HDFS asks, and the sticky bit).
func removeEntry(ctx context.Context, tx *client.Txn, who caller, dir client.FileInfo, name string, fi client.FileInfo, p string, recursive bool) error {
	if fi.Type != client.TypeDir {
		return wrapPath(p, clientx.At(tx).UnlinkAt(ctx, dir.Ino, name))
	}
	if recursive {
		if err := need(who, fi, permRead|permWrite|permSearch, p); err != nil {
			return err
		}
		err := eachEntry(ctx, tx, fi.Ino, p, func(e client.DirEntry) error {
			cp := path.Join(p, e.Name)
			if err := mayRemove(who, fi, e.Info, p, cp); err != nil {
				return err
			}
			return removeEntry(ctx, tx, who, fi, e.Name, e.Info, cp, true)
		})
		if err != nil {
			return err
		}
	}
	err := clientx.At(tx).RmdirAt(ctx, dir.Ino, name)
	if errors.Is(err, client.ErrNotEmpty) {
		return excNotEmpty.errorf("`%s is non empty': Directory is not empty", p)
	}
	return wrapPath(p, err)
}

// setAttr changes attributes of the file at rq.path after check says the
// caller may.
func (g *Gateway) setAttr(rq *request, check func(l located) error, s func(l located) (client.SetAttr, bool)) (bool, error) {
	var changed bool
	err := g.txn(rq, func(ctx context.Context, tx *client.Txn) error {
		l, err := locateExisting(ctx, tx, rq.who, rq.path)
		if err == nil {
			err = check(l)
		}
		if err != nil {
			return err
		}
		sa, ok := s(l)
		changed = ok
		if !ok {
			return nil
		}
		_, err = tx.SetAttr(ctx, l.fi.Ino, sa)
		return wrapPath(rq.path, err)
	})
	return changed, err
}

func (g *Gateway) setPermission(rq *request) error {
	mode, err := rq.q.permParam(0o755)
	if err != nil {
		return err
	}
	_, err = g.setAttr(rq, func(l located) error {
		if !rq.who.owns(l.fi) {
			return excAccess.errorf("Permission denied. user=%s is not the owner of inode=%s", rq.who.user, rq.path)
		}
		return nil
	}, func(l located) (client.SetAttr, bool) {
		// Setuid and setgid are kept: WebHDFS permissions do not carry them.
		m := client.UnixMode(mode | client.UnixBits(l.fi.Mode)&0o6000)
		return client.SetAttr{Mode: &m}, true
	})
	if err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (g *Gateway) setOwner(rq *request) error {
	owner, group := rq.q.get("owner"), rq.q.get("group")
	if owner == "" && group == "" {
		return excArgument.errorf("SETOWNER needs owner= or group= (both are empty)")
	}
	_, err := g.setAttr(rq, func(l located) error {
		who := rq.who
		if owner != "" && owner != l.fi.User && !who.super {
			return excAccess.errorf("User %s is not a super user (non-super user cannot change owner of %s)", who.user, rq.path)
		}
		if group != "" && group != l.fi.Group && !who.super && !(who.owns(l.fi) && slices.Contains(who.groups, group)) {
			return excAccess.errorf("User %s does not belong to %s (or does not own %s)", who.user, group, rq.path)
		}
		return nil
	}, func(l located) (client.SetAttr, bool) {
		var s client.SetAttr
		if owner != "" {
			s.User = &owner
		}
		if group != "" {
			s.Group = &group
		}
		return s, true
	})
	if err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// replication returns the replication to give a file for a requested one:
// as in HDFS a target, which more datanodes than are alive do not refuse,
// so it is capped at the live datanodes (Hadoop clients ask for their
// dfs.replication, 3 by default, whatever the cluster). 0 stays 0 (the
// cluster default).
func (g *Gateway) replication(ctx context.Context, want int) (int, error) {
	if want <= 1 {
		return want, nil
	}
	nodes, err := g.c.Datanodes(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing datanodes for replication %d: %w", want, err)
	}
	live := 0
	for _, n := range nodes {
		if n.Alive && n.Enabled {
			live++
		}
	}
	return min(want, max(live, 1)), nil
}

func (g *Gateway) setReplication(rq *request) error {
	rep, err := rq.q.intParam("replication", 0, 1, 16)
	if err != nil {
		return err
	}
	if rep == 0 {
		return excArgument.errorf("SETREPLICATION needs replication=N (1 to 16)")
	}
	r, err := g.replication(rq.ctx, int(rep))
	if err != nil {
		return err
	}
	changed, err := g.setAttr(rq, func(l located) error {
		return need(rq.who, l.fi, permWrite, rq.path)
	}, func(l located) (client.SetAttr, bool) {
		return client.SetAttr{Rep: &r}, l.fi.Type == client.TypeFile
	})
	if err != nil {
		return err
	}
	writeBool(rq.w, changed)
	return nil
}

// setTimes sets the modification time; PlasmaFS keeps no access time, so
// accesstime is accepted and ignored.
func (g *Gateway) setTimes(rq *request) error {
	mt, err := rq.q.intParam("modificationtime", -1, -1, 1<<62)
	if err != nil {
		return err
	}
	if _, err := rq.q.intParam("accesstime", -1, -1, 1<<62); err != nil {
		return err
	}
	_, err = g.setAttr(rq, func(l located) error {
		if rq.who.owns(l.fi) {
			return nil
		}
		return need(rq.who, l.fi, permWrite, rq.path)
	}, func(l located) (client.SetAttr, bool) {
		if mt < 0 {
			return client.SetAttr{}, false
		}
		t := time.UnixMilli(mt)
		return client.SetAttr{Mtime: &t}, true
	})
	if err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}
