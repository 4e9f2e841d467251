package mount

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// namenodeRequests returns the namenode's count of requests of op
// ('plasma admin stats').
func namenodeRequests(t *testing.T, c *clustertest.Procs, op string) int {
	t.Helper()
	for _, l := range strings.Split(c.MustRun("admin", "stats"), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == op {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("admin stats: %q", l)
			}
			return n
		}
	}
	return 0
}

// filesByOther makes n files d/f-000… through mount other, so that the
// mount under test has none of them cached.
func filesByOther(t *testing.T, other *testkit.Mount, n int) []string {
	t.Helper()
	d := other.Path("d")
	testkit.MustOK(t, "mkdir", os.Mkdir(d, 0o755))
	var names []string
	for i := range n {
		name := fmt.Sprintf("f-%03d", i)
		testkit.MustOK(t, "create", os.WriteFile(filepath.Join(d, name), []byte(name), 0o644))
		names = append(names, name)
	}
	return names
}

// TestDirScanAnswersLookupsFromOneListing: a stat of every file of a
// directory the mount has not cached (a build, a backup; metarates once
// its cached entries have run out) costs a few namenode lookups and a
// few listings, not one lookup per file.
func TestDirScanAnswersLookupsFromOneListing(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)
	other := testkit.StartMount(t, c)
	names := filesByOther(t, other, 200)
	before := namenodeRequests(t, c, "lookup")
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(m.Path("d"), n)); err != nil {
			t.Fatal(err)
		}
	}
	if got := namenodeRequests(t, c, "lookup") - before; got >= len(names)/2 {
		t.Errorf("stat of %d files sent %d lookups to the namenode", len(names), got)
	}
}

// TestDirScanShowsOtherClientsChanges: names and attributes the mount
// cached from a listing (a scan of the directory) follow another
// client's remove, rename and chmod once the cache timeout has run, as
// those cached from lookups do.
func TestDirScanShowsOtherClientsChanges(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)
	other := testkit.StartMount(t, c)
	names := filesByOther(t, other, 40)
	d, od := m.Path("d"), other.Path("d")
	before := namenodeRequests(t, c, "readdir")
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(d, n)); err != nil {
			t.Fatal(err)
		}
	}
	if namenodeRequests(t, c, "readdir") == before {
		t.Fatal("the mount listed no part of the directory: the test tests nothing")
	}
	testkit.MustOK(t, "remove", os.Remove(filepath.Join(od, "f-030")))
	testkit.MustOK(t, "rename", os.Rename(filepath.Join(od, "f-031"), filepath.Join(od, "g-031")))
	testkit.MustOK(t, "chmod", os.Chmod(filepath.Join(od, "f-032"), 0o600))

	testkit.AwaitCond(t, 10*time.Second, "a file another client removed still shows", func() bool {
		_, err := os.Stat(filepath.Join(d, "f-030"))
		return errors.Is(err, fs.ErrNotExist)
	})
	testkit.AwaitCond(t, 10*time.Second, "a file another client renamed shows under its old name", func() bool {
		_, err := os.Stat(filepath.Join(d, "f-031"))
		return errors.Is(err, fs.ErrNotExist)
	})
	testkit.AwaitCond(t, 10*time.Second, "a chmod by another client does not show", func() bool {
		st, err := os.Stat(filepath.Join(d, "f-032"))
		return err == nil && st.Mode().Perm() == 0o600
	})
	if b, err := os.ReadFile(filepath.Join(d, "g-031")); err != nil || string(b) != "f-031" {
		t.Fatalf("renamed file: %q, %v", b, err)
	}
}
