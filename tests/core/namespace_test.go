package core

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestNamespaceCommands: links, symlinks, renames and removals through
// the CLI, with the link counts and errors POSIX users expect.
func TestNamespaceCommands(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	c.MustRun("mkdir", "-p", "/a/b/c")
	if out, code := c.Run([]byte("payload"), "put", "-stdin", "/a/f"); code != 0 {
		t.Fatal(out)
	}
	c.MustRun("ln", "/a/f", "/a/b/hard")
	c.MustRun("ln", "-s", "/a/f", "/a/sym")
	c.MustRun("ln", "-s", "b/c", "/a/rel")
	if out := c.MustRun("cat", "/a/b/hard"); out != "payload" {
		t.Fatalf("hard link reads %q", out)
	}
	if out := c.MustRun("cat", "/a/sym"); out != "payload" {
		t.Fatalf("symlink reads %q", out)
	}
	if out := c.MustRun("stat", "/a/f"); !strings.Contains(out, "links: 2") {
		t.Fatalf("link count after ln:\n%s", out)
	}
	if out := c.MustRun("ls", "-l", "/a"); !strings.Contains(out, "sym -> /a/f") {
		t.Fatalf("ls -l shows no symlink target:\n%s", out)
	}
	c.MustRun("mv", "/a/f", "/a/rel/moved") // through a relative symlink into /a/b/c
	if out := c.MustRun("cat", "/a/b/c/moved"); out != "payload" {
		t.Fatalf("after mv: %q", out)
	}
	if out, code := c.Run(nil, "cat", "/a/sym"); code == 0 || !strings.Contains(out, "no such file") {
		t.Fatalf("dangling symlink: %d %q", code, out)
	}
	c.MustRun("rm", "/a/b/hard")
	if out := c.MustRun("stat", "/a/b/c/moved"); !strings.Contains(out, "links: 1") {
		t.Fatalf("link count after rm:\n%s", out)
	}
	// A directory cannot move into itself; a non-empty one cannot be
	// replaced or removed without -r.
	if out, code := c.Run(nil, "mv", "/a", "/a/b/c/inside"); code == 0 || !strings.Contains(out, "into itself") {
		t.Fatalf("mv into itself: %d %q", code, out)
	}
	if out, code := c.Run(nil, "rm", "/a/b"); code == 0 || !strings.Contains(out, "is a directory") {
		t.Fatalf("rm dir: %d %q", code, out)
	}
	c.MustRun("rm", "-r", "/a")
	if out := c.MustRun("ls", "/"); strings.TrimSpace(out) != "" {
		t.Fatalf("after rm -r: %q", out)
	}
	if out := c.MustRun("fsck"); !strings.Contains(out, " 0 problems") {
		t.Fatal(out)
	}
	// Rename over an existing file replaces it atomically.
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	testkit.WriteFile(t, cl, "/x", []byte("new"), 1)
	testkit.WriteFile(t, cl, "/y", []byte("old"), 1)
	if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Rename(ctx, "/x", "/y") }); err != nil {
		t.Fatal(err)
	}
	if got := testkit.ReadFile(t, cl, "/y"); string(got) != "new" {
		t.Fatalf("/y = %q", got)
	}
	if _, err := cl.Lookup(ctx, "/x"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("/x after rename: %v", err)
	}
}

// TestTrailingSlash: a trailing slash names a directory; on a file it is
// an error, never silently dropped.
func TestTrailingSlash(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("create", "/f")
	c.MustRun("mkdir", "/d")
	for _, args := range [][]string{{"stat", "/f/"}, {"cat", "/f/"}, {"create", "/x/"}, {"rm", "/f/"}, {"mv", "/f/", "/g"}} {
		if out, code := c.Run(nil, args...); code == 0 {
			t.Errorf("plasma %v succeeded (%q); a trailing slash on a non-directory is an error", args, out)
		}
	}
	c.MustRun("stat", "/d/")
	if out, code := c.Run(nil, "stat", "/x"); code == 0 {
		t.Errorf("create /x/ made a file: %s", out)
	}
}
