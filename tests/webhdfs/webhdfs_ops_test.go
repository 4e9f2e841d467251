package webhdfs

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

type webhdfsStatus struct {
	PathSuffix, Type, Owner, Group, Permission, Symlink string
	Length, ModificationTime, BlockSize                 int64
	FileID                                              uint64
	Replication                                         int
}

// TestWebHDFSOperations checks every operation's answer against what
// PlasmaFS holds: GETFILESTATUS, LISTSTATUS, LISTSTATUS_BATCH over more
// than a page, MKDIRS, RENAME (onto a name, into a directory, and the
// false answers), DELETE (a file, a non-empty directory without and with
// recursive), SETPERMISSION, SETOWNER, SETREPLICATION, SETTIMES,
// GETCONTENTSUMMARY, GETFILECHECKSUM (HDFS's MD5-of-MD5-of-CRC32C,
// recomputed here) and GETHOMEDIRECTORY.
func TestWebHDFSOperations(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("chmod", "777", "/")
	g := startWebHDFS(t, c)
	u := func(p, op string, kv ...string) string {
		return g.url(p, op, append([]string{"user.name", "alice"}, kv...)...)
	}
	ok := func(method, url string) webhdfsReply {
		t.Helper()
		r := webhdfsDo(t, method, url, nil)
		if r.Status/100 != 2 {
			t.Fatalf("%s %s: status %d: %s", method, url, r.Status, r.Body)
		}
		return r
	}
	put := func(p, data string) {
		t.Helper()
		r := webhdfsDo(t, "PUT", u(p, "CREATE", "data", "true", "overwrite", "true"), strings.NewReader(data))
		if r.Status != 201 {
			t.Fatalf("CREATE %s: %d %s", p, r.Status, r.Body)
		}
	}
	var b struct{ Boolean bool }

	// MKDIRS makes parents; GETFILESTATUS shows what it made.
	ok("PUT", u("/a/b/c", "MKDIRS", "permission", "750")).decode(t, &b)
	if !b.Boolean {
		t.Fatal("MKDIRS answered false")
	}
	var st struct{ FileStatus webhdfsStatus }
	ok("GET", u("/a/b/c", "GETFILESTATUS")).decode(t, &st)
	if s := st.FileStatus; s.Type != "DIRECTORY" || s.Permission != "750" || s.Owner != "alice" || s.PathSuffix != "" {
		t.Errorf("GETFILESTATUS of a directory MKDIRS made: %+v", s)
	}
	if got := testkit.PlasmaOwner(t, c, "/a/b"); !strings.HasPrefix(got, "alice:") {
		t.Errorf("a parent MKDIRS made belongs to %s, want alice", got)
	}

	data := strings.Repeat("0123456789abcdef", 10000) // 160000 bytes: 3 blocks of 64 KiB
	put("/a/f", data)
	ok("GET", u("/a/f", "GETFILESTATUS")).decode(t, &st)
	if s := st.FileStatus; s.Type != "FILE" || s.Length != int64(len(data)) || s.Permission != "644" || s.Owner != "alice" || s.BlockSize != 64<<10 || s.Replication < 1 {
		t.Errorf("GETFILESTATUS of a file: %+v", s)
	}
	fi := plasmaStat(t, c, "/a/f")
	if st.FileStatus.FileID != fi.Ino || st.FileStatus.ModificationTime != fi.Mtime.UnixMilli() {
		t.Errorf("GETFILESTATUS fileId %d mtime %d, PlasmaFS has inode %d mtime %d", st.FileStatus.FileID, st.FileStatus.ModificationTime, fi.Ino, fi.Mtime.UnixMilli())
	}

	// GETFILEBLOCKLOCATIONS: a location per block of the range.
	var bl struct {
		BlockLocations struct {
			BlockLocation []struct {
				Offset, Length int64
				Hosts, Names   []string
			}
		}
	}
	ok("GET", u("/a/f", "GETFILEBLOCKLOCATIONS")).decode(t, &bl)
	if got := bl.BlockLocations.BlockLocation; len(got) != 3 || got[0].Offset != 0 || got[1].Length != 64<<10 ||
		got[2].Offset != 128<<10 || got[2].Length != int64(len(data))-128<<10 || len(got[2].Hosts) != 1 {
		t.Errorf("GETFILEBLOCKLOCATIONS of a 3-block file: %+v", got)
	}
	ok("GET", u("/a/f", "GETFILEBLOCKLOCATIONS", "offset", "70000", "length", "10000")).decode(t, &bl)
	if got := bl.BlockLocations.BlockLocation; len(got) != 1 || got[0].Offset != 64<<10 || got[0].Length != 64<<10 {
		t.Errorf("GETFILEBLOCKLOCATIONS offset 70000 length 10000: %+v, want the second block", got)
	}

	// LISTSTATUS lists names with their status; a file lists as itself.
	var ls struct {
		FileStatuses struct{ FileStatus []webhdfsStatus }
	}
	ok("GET", u("/a", "LISTSTATUS")).decode(t, &ls)
	if got := ls.FileStatuses.FileStatus; len(got) != 2 || got[0].PathSuffix != "b" || got[1].PathSuffix != "f" || got[1].Length != int64(len(data)) {
		t.Errorf("LISTSTATUS /a: %+v", got)
	}
	for _, op := range []string{"LISTSTATUS", "LISTSTATUS_BATCH"} {
		if r := ok("GET", u("/a/b/c", op)); !strings.Contains(string(r.Body), `"FileStatus":[]`) {
			t.Errorf("%s of an empty directory: %s, want an empty FileStatus array (Hadoop's client fails on null)", op, r.Body)
		}
	}
	ok("GET", u("/a/f", "LISTSTATUS")).decode(t, &ls)
	if got := ls.FileStatuses.FileStatus; len(got) != 1 || got[0].PathSuffix != "" || got[0].Type != "FILE" {
		t.Errorf("LISTSTATUS of a file: %+v", got)
	}

	// LISTSTATUS_BATCH pages through a directory bigger than a page.
	const many = 2500
	cl := c.Client(client.Config{})
	defer cl.Close()
	testkit.MustOK(t, "fill /big", cl.Txn(context.Background(), func(ctx context.Context, tx *client.Txn) error {
		if _, err := tx.Mkdir(ctx, "/big", 0o755); err != nil {
			return err
		}
		for i := 0; i < many; i++ {
			if _, err := tx.Create(ctx, fmt.Sprintf("/big/f%05d", i), client.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}))
	var names []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > many {
			t.Fatal("LISTSTATUS_BATCH does not end")
		}
		var bl struct {
			DirectoryListing struct {
				PartialListing struct {
					FileStatuses struct{ FileStatus []webhdfsStatus }
				}
				RemainingEntries int
			}
		}
		ok("GET", u("/big", "LISTSTATUS_BATCH", "startAfter", after)).decode(t, &bl)
		page := bl.DirectoryListing.PartialListing.FileStatuses.FileStatus
		for _, s := range page {
			names = append(names, s.PathSuffix)
		}
		if bl.DirectoryListing.RemainingEntries == 0 {
			break
		}
		if len(page) == 0 {
			t.Fatal("LISTSTATUS_BATCH: an empty page with entries remaining")
		}
		after = page[len(page)-1].PathSuffix
	}
	ok("GET", u("/big", "LISTSTATUS")).decode(t, &ls)
	if len(names) != many || len(ls.FileStatuses.FileStatus) != many || names[0] != "f00000" || names[many-1] != fmt.Sprintf("f%05d", many-1) {
		t.Errorf("LISTSTATUS_BATCH listed %d names, LISTSTATUS %d, want %d", len(names), len(ls.FileStatuses.FileStatus), many)
	}
	for i := 1; i < len(names); i++ {
		if names[i] <= names[i-1] {
			t.Fatalf("LISTSTATUS_BATCH repeats or reorders names: %s after %s", names[i], names[i-1])
		}
	}

	// GETCONTENTSUMMARY counts the tree.
	var cs struct {
		ContentSummary struct {
			DirectoryCount, FileCount, Length, Quota, SpaceConsumed, SpaceQuota int64
		}
	}
	ok("GET", u("/a", "GETCONTENTSUMMARY")).decode(t, &cs)
	if s := cs.ContentSummary; s.DirectoryCount != 3 || s.FileCount != 1 || s.Length != int64(len(data)) || s.Quota != -1 || s.SpaceConsumed < s.Length {
		t.Errorf("GETCONTENTSUMMARY /a: %+v (want 3 directories, 1 file of %d bytes)", s, len(data))
	}

	// GETFILECHECKSUM: MD5 of the blocks' MD5s of 512-byte CRC32Cs.
	var ck struct {
		FileChecksum struct {
			Algorithm, Bytes string
			Length           int
		}
	}
	ok("GET", u("/a/f", "GETFILECHECKSUM")).decode(t, &ck)
	wantAlg, wantBytes := md5md5crc32c([]byte(data), 64<<10)
	if ck.FileChecksum.Algorithm != wantAlg || ck.FileChecksum.Bytes != wantBytes || ck.FileChecksum.Length != 28 {
		t.Errorf("GETFILECHECKSUM: %+v, want %s %s (28 bytes)", ck.FileChecksum, wantAlg, wantBytes)
	}

	// SETPERMISSION, SETOWNER (group: alice's own), SETREPLICATION, SETTIMES.
	ok("PUT", u("/a/f", "SETPERMISSION", "permission", "1640"))
	ok("PUT", u("/a/f", "SETREPLICATION", "replication", "1")).decode(t, &b)
	if !b.Boolean {
		t.Error("SETREPLICATION of a file answered false")
	}
	ok("PUT", u("/a/f", "SETOWNER", "group", "alice"))
	mtime := time.Date(2020, 2, 3, 4, 5, 6, 7e6, time.UTC)
	ok("PUT", u("/a/f", "SETTIMES", "modificationtime", fmt.Sprint(mtime.UnixMilli()), "accesstime", "-1"))
	fi = plasmaStat(t, c, "/a/f")
	if client.UnixBits(fi.Mode)&0o7777 != 0o1640 || fi.Rep != 1 || fi.Group != "alice" || !fi.Mtime.Equal(mtime) {
		t.Errorf("after SETPERMISSION 1640, SETREPLICATION 1, SETOWNER group alice, SETTIMES %v: mode %o rep %d group %s mtime %v",
			mtime, client.UnixBits(fi.Mode), fi.Rep, fi.Group, fi.Mtime)
	}
	// Replication is a target, as in HDFS: more than the live datanodes
	// (Hadoop clients ask for 3) is capped, not refused.
	put("/a/r3", "r")
	ok("PUT", u("/a/r3", "CREATE", "data", "true", "overwrite", "true", "replication", "3"))
	if fi := plasmaStat(t, c, "/a/r3"); fi.Rep != 2 {
		t.Errorf("CREATE replication=3 on 2 datanodes: replication %d, want 2", fi.Rep)
	}
	ok("PUT", u("/a/r3", "SETREPLICATION", "replication", "5")).decode(t, &b)
	if fi := plasmaStat(t, c, "/a/r3"); !b.Boolean || fi.Rep != 2 {
		t.Errorf("SETREPLICATION 5 on 2 datanodes: %v, replication %d, want 2", b.Boolean, fi.Rep)
	}
	ok("DELETE", u("/a/r3", "DELETE"))
	ok("PUT", u("/a", "SETREPLICATION", "replication", "2")).decode(t, &b)
	if b.Boolean {
		t.Error("SETREPLICATION of a directory answered true")
	}

	// RENAME: onto a new name, into a directory, and false when the
	// source is missing or the destination a file.
	ok("PUT", u("/a/f", "RENAME", "destination", "/a/g")).decode(t, &b)
	if !b.Boolean || plasmaExists(t, c, "/a/f") || !plasmaExists(t, c, "/a/g") {
		t.Errorf("RENAME /a/f to /a/g: %v", b.Boolean)
	}
	ok("PUT", u("/a/g", "RENAME", "destination", "/a/b")).decode(t, &b)
	if !b.Boolean || !plasmaExists(t, c, "/a/b/g") {
		t.Errorf("RENAME of a file onto a directory should move it into it: %v", b.Boolean)
	}
	ok("PUT", u("/a/nothing", "RENAME", "destination", "/a/x")).decode(t, &b)
	if b.Boolean {
		t.Error("RENAME of a missing file answered true")
	}
	put("/a/h", "h")
	ok("PUT", u("/a/h", "RENAME", "destination", "/a/b/g")).decode(t, &b)
	if b.Boolean || c.MustRun("cat", "/a/b/g") != data {
		t.Error("RENAME onto an existing file replaced it (HDFS answers false)")
	}

	// DELETE: a file; a non-empty directory only with recursive.
	ok("DELETE", u("/a/h", "DELETE")).decode(t, &b)
	if !b.Boolean || plasmaExists(t, c, "/a/h") {
		t.Error("DELETE of a file")
	}
	ok("DELETE", u("/a/h", "DELETE")).decode(t, &b)
	if b.Boolean {
		t.Error("DELETE of a missing file answered true")
	}
	r := webhdfsDo(t, "DELETE", u("/a", "DELETE"), nil)
	wantException(t, "DELETE of a non-empty directory without recursive", r, 403, "PathIsNotEmptyDirectoryException")
	ok("DELETE", u("/a", "DELETE", "recursive", "true")).decode(t, &b)
	if !b.Boolean || plasmaExists(t, c, "/a") {
		t.Error("DELETE recursive=true of a tree")
	}

	var home struct{ Path string }
	ok("GET", u("/", "GETHOMEDIRECTORY")).decode(t, &home)
	if home.Path != "/user/alice" {
		t.Errorf("GETHOMEDIRECTORY: %q", home.Path)
	}
}

// md5md5crc32c is HDFS's file checksum of data with blocks of bs bytes
// and 512-byte CRC32C chunks: the algorithm name and the hex bytes of
// MD5MD5CRC32FileChecksum's serialisation.
func md5md5crc32c(data []byte, bs int) (string, string) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	file := md5.New()
	for off := 0; off < len(data); off += bs {
		block := data[off:min(off+bs, len(data))]
		var crcs []byte
		for c := 0; c < len(block); c += 512 {
			crcs = binary.BigEndian.AppendUint32(crcs, crc32.Checksum(block[c:min(c+512, len(block))], tab))
		}
		m := md5.Sum(crcs)
		file.Write(m[:])
	}
	perBlock := 0
	if len(data) > bs {
		perBlock = bs / 512
	}
	out := binary.BigEndian.AppendUint32(nil, 512)
	out = binary.BigEndian.AppendUint64(out, uint64(perBlock))
	out = file.Sum(out)
	return fmt.Sprintf("MD5-of-%dMD5-of-512CRC32C", perBlock), hex.EncodeToString(out)
}

func plasmaStat(t *testing.T, c *clustertest.Procs, path string) client.FileInfo {
	t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	fi, err := clientx.Auto(cl, clientx.Durable).Lstat(context.Background(), path)
	testkit.MustOK(t, "stat "+path, err)
	return fi
}

func plasmaExists(t *testing.T, c *clustertest.Procs, path string) bool {
	t.Helper()
	_, code := c.Run(nil, "stat", path)
	return code == 0
}
