package webhdfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/plasmafs/plasma/client"
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
	cur, err := tx.Stat(ctx, rootIno)
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
		next, err := tx.LookupAt(ctx, cur.Ino, name)
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
		tx.CreateAs(rq.who.user, rq.who.group())
		return fn(ctx, tx)
	})
}

// ---- status

// fileStatus is Hadoop's FileStatus JSON object.
type fileStatus struct {
	AccessTime       int64  `json:"accessTime"`
	BlockSize        int    `json:"blockSize"`
	ChildrenNum      int    `json:"childrenNum"`
	FileID           uint64 `json:"fileId"`
	Group            string `json:"group"`
	Length           int64  `json:"length"`
	ModificationTime int64  `json:"modificationTime"`
	Owner            string `json:"owner"`
	PathSuffix       string `json:"pathSuffix"`
	Permission       string `json:"permission"`
	Replication      int    `json:"replication"`
	StoragePolicy    int    `json:"storagePolicy"`
	Symlink          string `json:"symlink,omitempty"`
	Type             string `json:"type"`
}

// statusOf renders a file's attributes as Hadoop's FileStatus. PlasmaFS
// keeps no access time: the modification time stands for it.
func statusOf(a client.FileInfo, suffix string) fileStatus {
	s := fileStatus{
		AccessTime: a.Mtime.UnixMilli(), FileID: a.Ino, Group: a.Group, ModificationTime: a.Mtime.UnixMilli(),
		Owner: a.User, PathSuffix: suffix, Permission: fmt.Sprintf("%o", client.UnixBits(a.Mode)&0o1777), Type: "FILE",
	}
	switch a.Type {
	case client.TypeDir:
		s.Type = "DIRECTORY"
	case client.TypeSymlink:
		s.Type, s.Symlink = "SYMLINK", a.Target
	default:
		s.Length, s.BlockSize, s.Replication = a.Size, a.Blocksize, a.Rep
	}
	return s
}

func (g *Gateway) getFileStatus(rq *request) error {
	var fi client.FileInfo
	err := g.readTxn(rq, func(ctx context.Context, tx *client.Txn) (bool, error) {
		l, err := locate(ctx, tx, rq.who, rq.path)
		if err == nil {
			err = l.exists()
		}
		fi = l.fi
		return true, err
	})
	if err != nil {
		return err
	}
	writeJSON(rq.w, http.StatusOK, map[string]any{"FileStatus": statusOf(fi, "")})
	return nil
}

// listPage is how many entries one namenode request lists (and one
// LISTSTATUS_BATCH answers).
const listPage = 1024

// list passes the entries of the directory at rq.path after the name
// after to emit, a page at a time (only the first page with batch), and
// reports whether more follow; a file lists as itself, as in HDFS. All
// pages come from one transaction, which is run again on a conflict only
// while nothing has been emitted.
func (g *Gateway) list(rq *request, after string, batch bool, emit func([]fileStatus) error) (bool, error) {
	var more, emitted bool
	err := g.readTxn(rq, func(ctx context.Context, tx *client.Txn) (bool, error) {
		err := listIn(ctx, tx, rq, after, batch, &more, func(page []fileStatus) error {
			emitted = true
			return emit(page)
		})
		return !emitted, err
	})
	return more, err
}

func listIn(ctx context.Context, tx *client.Txn, rq *request, after string, batch bool, more *bool, emit func([]fileStatus) error) error {
	l, err := locate(ctx, tx, rq.who, rq.path)
	if err == nil {
		err = l.exists()
	}
	if err != nil {
		return err
	}
	if l.fi.Type != client.TypeDir {
		return emit([]fileStatus{statusOf(l.fi, "")})
	}
	if err := need(rq.who, l.fi, permRead, rq.path); err != nil {
		return err
	}
	for {
		page, next, err := tx.ReadDirPage(ctx, l.fi.Ino, after, listPage, true)
		if err != nil {
			return fmt.Errorf("%s: %w", rq.path, err)
		}
		out := make([]fileStatus, len(page)) // never nil: Hadoop's client fails on null
		for i, e := range page {
			out[i] = statusOf(e.Info, e.Name)
		}
		*more = next && len(page) > 0
		if err := emit(out); err != nil {
			return err
		}
		if !*more || batch {
			return nil
		}
		after = page[len(page)-1].Name
	}
}

// readTxn runs fn in a transaction that is aborted afterwards (it only
// reads), again while it conflicts with another transaction and fn says
// it may be run again.
func (g *Gateway) readTxn(rq *request, fn func(ctx context.Context, tx *client.Txn) (again bool, err error)) error {
	delay := 100 * time.Microsecond
	for attempt := 0; ; attempt++ {
		tx, _ := g.c.Begin(rq.ctx)
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

// listStatus answers the whole listing, streamed a page at a time (a big
// directory is never whole in the gateway's memory). A failure after the
// first page is sent can only cut the answer short.
func (g *Gateway) listStatus(rq *request) error {
	started := false
	_, err := g.list(rq, "", false, func(page []fileStatus) error {
		for _, s := range page {
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			if !started {
				rq.w.Header().Set("Content-Type", "application/json")
				rq.w.WriteHeader(http.StatusOK)
				rq.w.Write([]byte(`{"FileStatuses":{"FileStatus":[`))
				started = true
			} else {
				rq.w.Write([]byte{','})
			}
			if _, err := rq.w.Write(b); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err != nil && started:
		g.opt.Log.Warn("webhdfs: listing failed mid-stream", "path", rq.path, "error", err.Error())
		panic(http.ErrAbortHandler)
	case err != nil:
		return err
	case !started: // an empty directory
		writeJSON(rq.w, http.StatusOK, map[string]any{"FileStatuses": map[string]any{"FileStatus": []fileStatus{}}})
	default:
		rq.w.Write([]byte("]}}\n"))
	}
	return nil
}

// listStatusBatch answers one page after startAfter. PlasmaFS does not
// count what follows: remainingEntries is 1 while more follow, 0 after the
// last page (clients only look at whether it is 0).
func (g *Gateway) listStatusBatch(rq *request) error {
	out := []fileStatus{}
	more, err := g.list(rq, rq.q.get("startafter"), true, func(page []fileStatus) error {
		out = page
		return nil
	})
	if err != nil {
		return err
	}
	remaining := 0
	if more {
		remaining = 1
	}
	writeJSON(rq.w, http.StatusOK, map[string]any{"DirectoryListing": map[string]any{
		"partialListing":   map[string]any{"FileStatuses": map[string]any{"FileStatus": out}},
		"remainingEntries": remaining}})
	return nil
}

func (g *Gateway) homeDirectory(rq *request) error {
	writeJSON(rq.w, http.StatusOK, map[string]string{"Path": "/user/" + rq.who.user})
	return nil
}

// serverDefaults is GETSERVERDEFAULTS, which Hadoop's client asks before
// a delete (for the trash interval: 0, no trash) and for encryption
// (none). Replication is the live datanodes, at most 3.
func (g *Gateway) serverDefaults(rq *request) error {
	st, err := g.c.FsStat(rq.ctx)
	if err != nil {
		return err
	}
	writeJSON(rq.w, http.StatusOK, map[string]any{"FsServerDefaults": map[string]any{
		"blockSize": st.Blocksize, "bytesPerChecksum": checksumBytesPerCRC, "writePacketSize": 64 << 10,
		"replication": min(max(st.LiveDatanodes, 1), 3), "fileBufferSize": 4096, "encryptDataTransfer": false,
		"trashInterval": 0, "checksumType": 2 /* CRC32C in Hadoop's DataChecksum.Type */, "keyProviderUri": "",
		"defaultStoragePolicyId": 7 /* HOT */}})
	return nil
}

func writeBool(w http.ResponseWriter, b bool) {
	writeJSON(w, http.StatusOK, map[string]bool{"boolean": b})
}

// ---- namespace changes

// mkdirs creates the directory p and its missing parents for who (with
// mode), as HDFS's mkdirs does, and returns the directory.
func mkdirs(ctx context.Context, tx *client.Txn, who caller, p string, mode uint32) (client.FileInfo, error) {
	cur, err := tx.Stat(ctx, rootIno)
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
		next, err := tx.LookupAt(ctx, cur.Ino, name)
		if errors.Is(err, client.ErrNotFound) {
			if err := need(who, cur, permWrite|permSearch, here); err != nil {
				return client.FileInfo{}, err
			}
			next, err = tx.MkdirAt(ctx, cur.Ino, name, client.UnixMode(mode))
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
		if err := tx.RenameAt(ctx, src.dir.Ino, src.name, to.dir.Ino, to.name, client.RenameOptions{NoReplace: true}); err != nil {
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
		return wrapPath(p, tx.UnlinkAt(ctx, dir.Ino, name))
	}
	if recursive {
		if err := need(who, fi, permRead|permWrite|permSearch, p); err != nil {
			return err
		}
		after := ""
		for {
			page, more, err := tx.ReadDirPage(ctx, fi.Ino, after, listPage, true)
			if err != nil {
				return wrapPath(p, err)
			}
			for _, e := range page {
				cp := path.Join(p, e.Name)
				if err := mayRemove(who, fi, e.Info, p, cp); err != nil {
					return err
				}
				if err := removeEntry(ctx, tx, who, fi, e.Name, e.Info, cp, true); err != nil {
					return err
				}
			}
			if !more || len(page) == 0 {
				break
			}
			after = page[len(page)-1].Name
		}
	}
	err := tx.RmdirAt(ctx, dir.Ino, name)
	if errors.Is(err, client.ErrNotEmpty) {
		return excNotEmpty.errorf("`%s is non empty': Directory is not empty", p)
	}
	return wrapPath(p, err)
}

func wrapPath(p string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", p, err)
}

// setAttr changes attributes of the file at rq.path after check says the
// caller may.
func (g *Gateway) setAttr(rq *request, check func(l located) error, s func(l located) (client.SetAttr, bool)) (bool, error) {
	var changed bool
	err := g.txn(rq, func(ctx context.Context, tx *client.Txn) error {
		l, err := locate(ctx, tx, rq.who, rq.path)
		if err == nil {
			err = l.exists()
		}
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
		if group != "" && group != l.fi.Group && !who.super && !(who.owns(l.fi) && containsGroup(who, group)) {
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

func containsGroup(who caller, g string) bool {
	for _, x := range who.groups {
		if x == g {
			return true
		}
	}
	return false
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

// ---- content summary

type contentSummary struct {
	DirectoryCount int64 `json:"directoryCount"`
	FileCount      int64 `json:"fileCount"`
	Length         int64 `json:"length"`
	Quota          int64 `json:"quota"`
	SpaceConsumed  int64 `json:"spaceConsumed"`
	SpaceQuota     int64 `json:"spaceQuota"`
}

// contentSummary counts the tree at rq.path (read and search permission
// on every directory in it); PlasmaFS has no quotas (-1).
func (g *Gateway) contentSummary(rq *request) error {
	var s contentSummary
	err := g.readTxn(rq, func(ctx context.Context, tx *client.Txn) (bool, error) {
		s = contentSummary{Quota: -1, SpaceQuota: -1}
		l, err := locate(ctx, tx, rq.who, rq.path)
		if err == nil {
			err = l.exists()
		}
		if err != nil {
			return true, err
		}
		return true, summarize(ctx, tx, rq.who, l.fi, rq.path, &s)
	})
	if err != nil {
		return err
	}
	writeJSON(rq.w, http.StatusOK, map[string]any{"ContentSummary": s})
	return nil
}

func summarize(ctx context.Context, tx *client.Txn, who caller, fi client.FileInfo, p string, s *contentSummary) error {
	switch fi.Type {
	case client.TypeDir:
	case client.TypeFile:
		s.FileCount++
		s.Length += fi.Size
		s.SpaceConsumed += fi.Size * int64(max(fi.Rep, 1))
		return nil
	default:
		s.FileCount++
		return nil
	}
	s.DirectoryCount++
	if err := need(who, fi, permRead|permSearch, p); err != nil {
		return err
	}
	after := ""
	for {
		page, more, err := tx.ReadDirPage(ctx, fi.Ino, after, listPage, true)
		if err != nil {
			return wrapPath(p, err)
		}
		for _, e := range page {
			if err := summarize(ctx, tx, who, e.Info, path.Join(p, e.Name), s); err != nil {
				return err
			}
		}
		if !more || len(page) == 0 {
			return nil
		}
		after = page[len(page)-1].Name
	}
}
