package security

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestHostileCreateAsIgnoredForUsers: an ordinary user asking to create
// as someone else (clientx.CreateAs, or raw OpCreate requests with FlagOwner
// and FlagGroup naming root, another user or a group she is not in, by
// path, by name in a directory, with missing parents) gets what she
// creates owned by herself; a superuser's CreateAs is honoured.
func TestHostileCreateAsIgnoredForUsers(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	var pub client.FileInfo
	testkit.MustOK(t, "mkdir /pub", admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		var err error
		if pub, err = tx.Mkdir(ctx, "/pub", 0o777); err != nil {
			return err
		}
		m := fs.FileMode(0o777)
		pub, err = tx.SetAttr(ctx, pub.Ino, client.SetAttr{Mode: &m})
		return err
	}))
	acred := c.IssueCredential("alice", auth.RoleUser)
	alice := c.Client(client.Config{CredentialFile: acred})
	defer alice.Close()
	// Through the client library.
	testkit.MustOK(t, "alice CreateAs", alice.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		clientx.CreateAs(tx, "root", "root")
		if _, err := clientx.At(tx).CreateAt(ctx, pub.Ino, "lib-file", client.CreateOptions{}); err != nil {
			return err
		}
		if _, err := clientx.At(tx).MkdirAt(ctx, pub.Ino, "lib-dir", 0o755); err != nil {
			return err
		}
		if _, err := clientx.At(tx).SymlinkAt(ctx, "lib-file", pub.Ino, "lib-link"); err != nil {
			return err
		}
		_, err := clientx.At(tx).MknodAt(ctx, pub.Ino, "lib-fifo", client.TypeFIFO, 0o644, 0)
		return err
	}))
	// Raw requests, each committed in its own round trip.
	conn := testkit.RawAs(t, c, acred)
	raw := []*wire.Request{
		{Op: wire.OpCreate, Path: "/pub/raw-file", Type: wire.TypeFile, Mode: 0o644, User: "root", Group: "root"},
		{Op: wire.OpCreate, Path: "/pub/raw-bob", Type: wire.TypeFile, Mode: 0o644, User: "bob", Group: "staff"},
		{Op: wire.OpCreate, Path: "/pub/raw-dir", Type: wire.TypeDir, Mode: 0o755, User: "root", Group: "wheel"},
		{Op: wire.OpCreate, Path: "/pub/a/b/c", Type: wire.TypeDir, Flags: wire.FlagParents, Mode: 0o755, User: "root", Group: "root"},
		{Op: wire.OpCreate, Path: "/pub/raw-link", Path2: "raw-file", Type: wire.TypeSymlink, User: "root", Group: "root"},
		{Op: wire.OpCreate, Ino: pub.Ino, Path: "raw-at", Type: wire.TypeFile, Flags: wire.FlagAt, Mode: 0o644, User: "admin", Group: "admin"},
	}
	for i, q := range raw {
		q.Txn, q.Flags = uint64(100+i), q.Flags|wire.FlagBegin|wire.FlagCommit|wire.FlagOwner|wire.FlagGroup
		if r := testkit.MustCall(t, conn, q); r.Attr == nil || r.Attr.User != "alice" || r.Attr.Group != "alice" {
			t.Errorf("raw create %s as %s:%s by alice answered %+v, want alice:alice", q.Path, q.User, q.Group, r.Attr)
		}
	}
	// A superuser's CreateAs names the owner.
	testkit.MustOK(t, "admin CreateAs", admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := clientx.At(clientx.CreateAs(tx, "bob", "staff")).CreateAt(ctx, pub.Ino, "for-bob", client.CreateOptions{})
		return err
	}))
	tx := admin.Begin()
	defer tx.Abort(ctx)
	for _, p := range []string{"lib-file", "lib-dir", "lib-link", "lib-fifo", "raw-file", "raw-bob", "raw-dir", "a", "a/b", "a/b/c", "raw-link", "raw-at"} {
		fi, err := tx.Lstat(ctx, "/pub/"+p)
		testkit.MustOK(t, "lstat /pub/"+p, err)
		if fi.User != "alice" || fi.Group != "alice" {
			t.Errorf("/pub/%s created by alice asking for another owner: %s:%s, want alice:alice", p, fi.User, fi.Group)
		}
	}
	if fi, err := tx.Lstat(ctx, "/pub/for-bob"); err != nil || fi.User != "bob" || fi.Group != "staff" {
		t.Errorf("/pub/for-bob created by a superuser as bob:staff: %s:%s %v", fi.User, fi.Group, err)
	}
}

// TestHostileDirNlinkUnderConcurrency: several clients move directories in
// and out of four parents at once (renames between parents, over empty
// directories, mkdir and rmdir, some undone in the same transaction); at
// the end every directory's link count is 2 + its subdirectories, as the
// namenode reports it and again after a namenode restart, and fsck is
// clean.
func TestHostileDirNlinkUnderConcurrency(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	parents := []string{"/p0", "/p1", "/p2", "/p3"}
	testkit.MustOK(t, "setup", admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		for _, p := range parents {
			if _, err := tx.Mkdir(ctx, p, 0o755); err != nil {
				return err
			}
		}
		for i := 0; i < 16; i++ {
			if _, err := tx.Mkdir(ctx, fmt.Sprintf("%s/d%d", parents[i%4], i), 0o755); err != nil {
				return err
			}
		}
		return nil
	}))
	var wg sync.WaitGroup
	var done atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.Client(client.Config{})
			defer cl.Close()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; i < 60; i++ {
				d := rng.IntN(16)
				to := parents[rng.IntN(4)]
				op := rng.IntN(4)
				// Conflicts are expected; only the final state is checked.
				err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
					// Where directory d is now (under its plain name or
					// the one it got renamed over an empty directory).
					name, from := fmt.Sprintf("d%d", d), ""
					for _, p := range parents {
						for _, n := range []string{name, name + "x"} {
							if _, err := tx.Lstat(ctx, p+"/"+n); err == nil {
								from, name = p, n
							}
						}
					}
					if from == "" {
						return fmt.Errorf("d%d not found", d)
					}
					plain := strings.TrimSuffix(name, "x")
					switch op {
					case 0: // out and back in, then away
						if err := tx.Rename(ctx, from+"/"+name, to+"/tmp"+name); err != nil {
							return err
						}
						if err := tx.Rename(ctx, to+"/tmp"+name, from+"/"+name); err != nil {
							return err
						}
						return tx.Rename(ctx, from+"/"+name, to+"/"+plain)
					case 1: // over an empty directory made for it
						if _, err := tx.Mkdir(ctx, to+"/"+plain+"x", 0o755); err != nil {
							return err
						}
						return tx.Rename(ctx, from+"/"+name, to+"/"+plain+"x")
					case 2: // into another parent
						return tx.Rename(ctx, from+"/"+name, to+"/"+plain)
					default: // a subdirectory made and removed, another kept
						if _, err := tx.Mkdir(ctx, from+"/"+name+"/s", 0o755); err != nil {
							return err
						}
						if err := tx.Rmdir(ctx, from+"/"+name+"/s"); err != nil {
							return err
						}
						_, err := tx.Mkdir(ctx, fmt.Sprintf("%s/%s/k%d-%d", from, name, w, i), 0o755)
						return err
					}
				})
				if err == nil {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if done.Load() < 40 {
		t.Fatalf("only %d of 240 transactions committed: the test exercises too little", done.Load())
	}
	t.Logf("%d of 240 transactions committed", done.Load())
	check := func(cl *client.Client, when string) {
		t.Helper()
		tx := cl.Begin()
		defer tx.Abort(ctx)
		var walk func(p string) int
		dirs := 0
		walk = func(p string) int {
			ents, err := tx.ReadDir(ctx, p)
			testkit.MustOK(t, "readdir "+p, err)
			sub := 0
			for _, e := range ents {
				if e.Type == client.TypeDir {
					sub++
					walk(strings.TrimSuffix(p, "/") + "/" + e.Name)
				}
			}
			fi, err := tx.Lstat(ctx, p)
			testkit.MustOK(t, "stat "+p, err)
			if fi.Nlink != uint32(2+sub) {
				t.Errorf("%s: %s has link count %d but %d subdirectories", when, p, fi.Nlink, sub)
			}
			dirs++
			return sub
		}
		walk("/")
		if dirs < 21 {
			t.Errorf("%s: only %d directories left", when, dirs)
		}
	}
	check(admin, "after concurrent renames")
	if out := c.MustRun("fsck"); !strings.Contains(out, " 0 problems") {
		t.Errorf("fsck after concurrent renames: %s", out)
	}
	admin.Close()
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(1)
	cl := c.Client(client.Config{})
	defer cl.Close()
	check(cl, "after a namenode restart")
}

// TestHostileMountCallerCannotTakeOver: through an allow_other mount (a
// superuser's credential), a local user without a name (uid 12345) owns
// what she creates, by number, in the mount and in PlasmaFS, and can read
// her own 0600 file; she cannot give it to root; a setgid file she asks
// for in a setgid directory of a group she is not in is not setgid; the
// directories' link counts follow her mkdir, rename and rmdir.
func TestHostileMountCallerCannotTakeOver(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	m := testkit.StartMount(t, c, "allow_other")
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Dir(m.Dir); strings.HasPrefix(d, tmp+"/"); d = filepath.Dir(d) {
		testkit.MustOK(t, "chmod "+d, os.Chmod(d, 0o755))
	}
	for _, d := range []string{"pub", "pub/sg", "pub/a", "pub/b"} {
		testkit.MustOK(t, "mkdir "+d, os.Mkdir(m.Path(d), 0o777))
		testkit.MustOK(t, "chmod "+d, os.Chmod(m.Path(d), 0o777))
	}
	testkit.MustOK(t, "chown sg", os.Chown(m.Path("pub/sg"), 0, 4242))
	testkit.MustOK(t, "chmod sg", os.Chmod(m.Path("pub/sg"), 0o777|fs.ModeSetgid))
	as := func(script string) (string, error) {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = m.Dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 12345, Gid: 23456}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := as("umask 077 && echo mine > pub/mine && cat pub/mine && install -m 2755 /dev/null pub/sg/tool && mkdir pub/a/x pub/a/y pub/a/z && mv pub/a/x pub/b/x && rmdir pub/a/y")
	if err != nil || out != "mine\n" {
		t.Fatalf("as uid 12345: %v: %q", err, out)
	}
	if out, err := as("chown 0 pub/mine"); err == nil {
		t.Errorf("uid 12345 gave her file to root through the mount: %s", out)
	}
	stat := func(name string) *syscall.Stat_t {
		t.Helper()
		fi, err := os.Lstat(m.Path(name))
		testkit.MustOK(t, "lstat "+name, err)
		return fi.Sys().(*syscall.Stat_t)
	}
	if st := stat("pub/mine"); st.Uid != 12345 || st.Gid != 23456 || st.Mode&0o7777 != 0o600 {
		t.Errorf("pub/mine: %d:%d mode %o, want 12345:23456 0600", st.Uid, st.Gid, st.Mode&0o7777)
	}
	if st := stat("pub/sg/tool"); st.Uid != 12345 || st.Gid != 4242 || st.Mode&0o2000 != 0 {
		t.Errorf("pub/sg/tool made setgid by a non-member: %d:%d mode %o, want 12345:4242 without setgid", st.Uid, st.Gid, st.Mode&0o7777)
	}
	for name, n := range map[string]uint64{"pub/a": 3, "pub/b": 3, "pub": 5} {
		if st := stat(name); st.Nlink != n {
			t.Errorf("%s: link count %d through the mount, want %d", name, st.Nlink, n)
		}
	}
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	tx := cl.Begin()
	testkit.MustOK(t, "begin", err)
	defer tx.Abort(ctx)
	if fi, err := tx.Lstat(ctx, "/pub/mine"); err != nil || fi.User != "12345" || fi.Group != "23456" {
		t.Errorf("/pub/mine in PlasmaFS: %s:%s %v, want 12345:23456", fi.User, fi.Group, err)
	}
}
