package webhdfs

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"path"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

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
		l, err := locateExisting(ctx, tx, rq.who, rq.path)
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
	l, err := locateExisting(ctx, tx, rq.who, rq.path)
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
		page, next, err := clientx.At(tx).ReadDirPage(ctx, l.fi.Ino, after, listPage, true)
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

// blockLocation is Hadoop's BlockLocation JSON object.
type blockLocation struct {
	CachedHosts   []string `json:"cachedHosts"`
	Corrupt       bool     `json:"corrupt"`
	Hosts         []string `json:"hosts"`
	Length        int64    `json:"length"`
	Names         []string `json:"names"`
	Offset        int64    `json:"offset"`
	StorageIDs    []string `json:"storageIds"`
	StorageTypes  []string `json:"storageTypes"`
	TopologyPaths []string `json:"topologyPaths"`
}

// blockLocations is GETFILEBLOCKLOCATIONS, which Spark and MapReduce ask
// to split input files: one location per block in the range (blocks of
// the blocksize FileStatus reports), each on this gateway, since clients
// read through it rather than from the datanodes.
func (g *Gateway) blockLocations(rq *request) error {
	off, err := rq.q.intParam("offset", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	length, err := rq.q.intParam("length", math.MaxInt64, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	var fi client.FileInfo
	err = g.readTxn(rq, func(ctx context.Context, tx *client.Txn) (bool, error) {
		l, err := locateFile(ctx, tx, rq.who, rq.path, permRead)
		fi = l.fi
		return true, err
	})
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(rq.r.Host)
	if err != nil {
		host = rq.r.Host
	}
	bs := int64(max(fi.Blocksize, 1))
	end := fi.Size
	if length < end-off {
		end = off + length
	}
	locs := []blockLocation{}
	for start := off - off%bs; start < end; start += bs {
		locs = append(locs, blockLocation{
			CachedHosts: []string{}, Hosts: []string{host}, Names: []string{rq.r.Host}, Offset: start, Length: min(bs, fi.Size-start),
			StorageIDs: []string{}, StorageTypes: []string{"DISK"}, TopologyPaths: []string{"/default-rack/" + rq.r.Host},
		})
	}
	writeJSON(rq.w, http.StatusOK, map[string]any{"BlockLocations": map[string]any{"BlockLocation": locs}})
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

// contentSummary counts the tree at rq.path (read and search permission
// on every directory in it); PlasmaFS has no quotas (-1).
func (g *Gateway) contentSummary(rq *request) error {
	var s contentSummary
	err := g.readTxn(rq, func(ctx context.Context, tx *client.Txn) (bool, error) {
		s = contentSummary{Quota: -1, SpaceQuota: -1}
		l, err := locateExisting(ctx, tx, rq.who, rq.path)
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
	return eachEntry(ctx, tx, fi.Ino, p, func(e client.DirEntry) error {
		return summarize(ctx, tx, who, e.Info, path.Join(p, e.Name), s)
	})
}

// eachEntry calls fn with every entry of directory dir (at path p), with
// its attributes, reading listPage entries a request, so that a walk of a
// big tree never holds a whole directory.
func eachEntry(ctx context.Context, tx *client.Txn, dir uint64, p string, fn func(client.DirEntry) error) error {
	after := ""
	for {
		page, more, err := clientx.At(tx).ReadDirPage(ctx, dir, after, listPage, true)
		if err != nil {
			return wrapPath(p, err)
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return err
			}
		}
		if !more || len(page) == 0 {
			return nil
		}
		after = page[len(page)-1].Name
	}
}
