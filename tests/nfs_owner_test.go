package tests

import (
	"context"
	"testing"

	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestNFSCreatesForTheCaller: files, directories and symbolic links made
// over NFS by a caller with AUTH_UNIX uid/gid 65534 (nobody/nogroup on
// Debian) belong to that user in PlasmaFS, as through the FUSE mount;
// without a credential they belong to the bridge's user.
func TestNFSCreatesForTheCaller(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := startNFS(t, c)
	ctx := context.Background()
	cl := c.Client(client.Config{})
	owner := func(p string) string {
		t.Helper()
		fi, err := cl.Auto(client.Durable).Lstat(ctx, p)
		mustOK(t, "stat "+p, err)
		return fi.User + ":" + fi.Group
	}
	root := dialNFS(t, b.Addr)
	_, err := root.Mkdir("/shared", 0o777)
	mustOK(t, "mkdir /shared (no credential)", err)
	if got := owner("/shared"); got == "nobody:nogroup" {
		t.Fatalf("/shared made without a credential belongs to %s", got)
	}
	nobody := dialNFSAs(t, b.Addr, rpc.NewAuthUnix("client", 65534, 65534).Auth())
	_, err = nobody.Create("/shared/file", 0o644)
	mustOK(t, "create as nobody", err)
	_, err = nobody.Mkdir("/shared/dir", 0o755)
	mustOK(t, "mkdir as nobody", err)
	mustOK(t, "symlink as nobody", nobody.Symlink("file", "/shared/link"))
	for _, p := range []string{"/shared/file", "/shared/dir", "/shared/link"} {
		if got := owner(p); got != "nobody:nogroup" {
			t.Errorf("%s made over NFS by uid 65534: owner %s, want nobody:nogroup", p, got)
		}
	}
}
