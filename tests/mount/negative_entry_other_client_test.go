package mount

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// missing reports whether p does not exist (failing the test on any other
// error).
func missing(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Lstat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat %s: %v", p, err)
	}
	return err != nil
}

// TestNegativeEntryEndsWithLease: the mount lets the kernel cache "no such
// name" in a directory it holds a lease on, and such a cached absence
// ends with the lease, whatever the mount's TTL: once another client (a
// second mount, the CLI) has created the name, this mount sees it. The
// mount runs with ttl=1h, so only the lease bounds the negative entries.
func TestNegativeEntryEndsWithLease(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c, "ttl=1h")
	other := testkit.StartMount(t, c)
	testkit.MustOK(t, "mkdir", os.Mkdir(m.Path("d"), 0o755))

	cases := []struct {
		name   string
		create func(name string)
	}{
		{"second mount", func(name string) {
			testkit.MustOK(t, "create through the second mount", os.WriteFile(filepath.Join(other.Path("d"), name), []byte("x"), 0o644))
		}},
		{"CLI", func(name string) {
			src := filepath.Join(t.TempDir(), "src")
			testkit.MustOK(t, "source", os.WriteFile(src, []byte("x"), 0o644))
			c.MustRun("put", src, "/d/"+name)
		}},
	}
	for i, tc := range cases {
		name := []string{"a", "b"}[i]
		p := filepath.Join(m.Path("d"), name)
		// Names the namenode does not find make the mount lease the
		// directory (a second miss); then the name's absence is answered
		// from the lease, and cached by the kernel.
		for k := 0; k < 5; k++ {
			if !missing(t, filepath.Join(m.Path("d"), "probe-"+name)) || !missing(t, p) {
				t.Fatalf("%s: names exist before they are created", tc.name)
			}
		}
		tc.create(name)
		testkit.AwaitCond(t, 10*time.Second, tc.name+": a name another client created stays missing in the mount", func() bool { return !missing(t, p) })
		b, err := os.ReadFile(p)
		if err != nil || string(b) != "x" {
			t.Fatalf("%s: read %q, %v", tc.name, b, err)
		}
	}
}
