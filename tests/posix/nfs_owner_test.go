package posix

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestNFSCreatesForTheCaller: files, directories and symbolic links made
// over NFS by a caller with AUTH_UNIX uid/gid 65534 (nobody/nogroup on
// Debian) belong to that user in PlasmaFS, as through the FUSE mount;
// made by root (uid 0, with -no-root-squash) they belong to the bridge's
// user (calls without a credential: nfs_identity_test.go).
func TestNFSCreatesForTheCaller(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	ctx := context.Background()
	cl := c.Client(client.Config{})
	owner := func(p string) string {
		t.Helper()
		fi, err := clientx.Auto(cl, clientx.Durable).Lstat(ctx, p)
		testkit.MustOK(t, "stat "+p, err)
		return fi.User + ":" + fi.Group
	}
	root := testkit.DialNFS(t, b.Addr)
	_, err := root.Mkdir("/shared", 0o777)
	testkit.MustOK(t, "mkdir /shared (uid 0)", err)
	if got := owner("/shared"); got == "nobody:nogroup" {
		t.Fatalf("/shared made by uid 0 belongs to %s", got)
	}
	nobody := testkit.DialNFSAs(t, b.Addr, rpc.NewAuthUnix("client", 65534, 65534).Auth())
	_, err = nobody.Create("/shared/file", 0o644)
	testkit.MustOK(t, "create as nobody", err)
	_, err = nobody.Mkdir("/shared/dir", 0o755)
	testkit.MustOK(t, "mkdir as nobody", err)
	testkit.MustOK(t, "symlink as nobody", nobody.Symlink("file", "/shared/link"))
	for _, p := range []string{"/shared/file", "/shared/dir", "/shared/link"} {
		if got := owner(p); got != "nobody:nogroup" {
			t.Errorf("%s made over NFS by uid 65534: owner %s, want nobody:nogroup", p, got)
		}
	}
}

// TestNFSChecksTheCallersAccess: with AUTH_UNIX, the bridge checks each
// caller's permissions (no kernel does it for NFS clients): uid 65534
// may not create in, remove from or rename within root's 0755
// directory, write root's 0644 file, chmod it or read a 0600 one, nor
// look up or list what is in root's 0700 directory; it may
// read the 0644 file, work in a 0777 directory and change its own files;
// in a sticky 0777 directory it may not remove another user's file.
func TestNFSChecksTheCallersAccess(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	root := testkit.DialNFSAs(t, b.Addr, rpc.NewAuthUnix("client", 0, 0).Auth())
	_, err := root.Mkdir("/private", 0o755)
	testkit.MustOK(t, "mkdir /private", err)
	_, err = root.Mkdir("/open", 0o777)
	testkit.MustOK(t, "mkdir /open", err)
	testkit.MustOK(t, "chmod /open", root.Setattr("/open", nfsc.Sattr3{Mode: nfsc.SetMode{SetIt: true, Mode: 0o1777}}))
	for _, f := range []struct {
		path string
		mode uint32
	}{{"/private/pub", 0o644}, {"/private/secret", 0o600}, {"/open/roots", 0o644}} {
		_, err := root.Create(f.path, os.FileMode(f.mode))
		testkit.MustOK(t, "create "+f.path, err)
		testkit.MustOK(t, "chmod "+f.path, root.Setattr(f.path, nfsc.Sattr3{Mode: nfsc.SetMode{SetIt: true, Mode: f.mode}}))
	}
	_, err = root.Mkdir("/closed", 0o700)
	testkit.MustOK(t, "mkdir /closed", err)
	testkit.MustOK(t, "chmod /closed", root.Setattr("/closed", nfsc.Sattr3{Mode: nfsc.SetMode{SetIt: true, Mode: 0o700}}))
	_, err = root.Create("/closed/f", 0o644)
	testkit.MustOK(t, "create /closed/f", err)
	nobody := testkit.DialNFSAs(t, b.Addr, rpc.NewAuthUnix("client", 65534, 65534).Auth())
	refused := func(what string, err error) {
		t.Helper()
		var ne *nfsc.Error
		if !errors.Is(err, os.ErrPermission) && !(errors.As(err, &ne) && ne.ErrorNum == nfsc.NFS3ErrAcces) {
			t.Errorf("%s as uid 65534: %v, want a permission error", what, err)
		}
	}
	_, _, err = nobody.Lookup("/closed/f", false)
	refused("lookup in root's 0700 directory", err)
	_, err = nobody.ReadDirPlus("/closed")
	refused("readdir of root's 0700 directory", err)
	if _, _, err := root.Lookup("/closed/f", false); err != nil {
		t.Errorf("root's lookup in its 0700 directory: %v", err)
	}
	_, err = nobody.Create("/private/mine", 0o644)
	refused("create in root's 0755 directory", err)
	refused("remove from root's 0755 directory", nobody.Remove("/private/pub"))
	refused("rename in root's 0755 directory", nobody.Rename("/private/pub", "/private/pub2"))
	refused("chmod of root's file", nobody.Setattr("/private/pub", nfsc.Sattr3{Mode: nfsc.SetMode{SetIt: true, Mode: 0o666}}))
	refused("truncate of root's 0644 file", nobody.Setattr("/private/pub", nfsc.Sattr3{Size: nfsc.SetSize{SetIt: true, Size: 0}}))
	if f, err := nobody.OpenFile("/private/pub", 0o644); err == nil {
		_, werr := f.Write([]byte("x"))
		if werr == nil {
			werr = f.Close()
		}
		refused("write to root's 0644 file", werr)
	}
	if f, err := nobody.Open("/private/secret"); err == nil {
		_, rerr := f.Read(make([]byte, 1))
		refused("read of root's 0600 file", rerr)
	}
	if f, err := nobody.Open("/private/pub"); err != nil {
		t.Errorf("open root's 0644 file for reading: %v", err)
	} else if _, err := f.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("read root's 0644 file: %v", err)
	}
	_, err = nobody.Create("/open/mine", 0o644)
	testkit.MustOK(t, "create in the 0777 directory", err)
	testkit.MustOK(t, "chmod of its own file", nobody.Setattr("/open/mine", nfsc.Sattr3{Mode: nfsc.SetMode{SetIt: true, Mode: 0o600}}))
	refused("remove of root's file from the sticky directory", nobody.Remove("/open/roots"))
	testkit.MustOK(t, "remove of its own file from the sticky directory", nobody.Remove("/open/mine"))
	// Nothing refused happened.
	for _, p := range []string{"/private/pub", "/private/secret", "/open/roots"} {
		if _, _, err := root.Lookup(p); err != nil {
			t.Errorf("%s after the refused operations: %v", p, err)
		}
	}
}
