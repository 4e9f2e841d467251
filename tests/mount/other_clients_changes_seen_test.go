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

// TestOtherClientsChangesSeen: what another client (a second mount) does
// to files this mount created and has cached (a remove, a rename, a
// chmod) shows in this mount once its cache timeout has run, while this
// mount keeps working in the directory (its lease, its own creates and
// cached entries there).
func TestOtherClientsChangesSeen(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)
	other := testkit.StartMount(t, c)
	d := m.Path("d")
	testkit.MustOK(t, "mkdir", os.Mkdir(d, 0o755))
	for _, n := range []string{"gone", "moved", "chmod"} {
		testkit.MustOK(t, "create", os.WriteFile(filepath.Join(d, n), []byte(n), 0o644))
		if _, err := os.Stat(filepath.Join(d, n)); err != nil {
			t.Fatal(err)
		}
	}
	od := other.Path("d")
	testkit.AwaitCond(t, 10*time.Second, "the second mount sees the files", func() bool {
		_, err := os.Stat(filepath.Join(od, "chmod"))
		return err == nil
	})
	testkit.MustOK(t, "remove", os.Remove(filepath.Join(od, "gone")))
	testkit.MustOK(t, "rename", os.Rename(filepath.Join(od, "moved"), filepath.Join(od, "moved-to")))
	testkit.MustOK(t, "chmod", os.Chmod(filepath.Join(od, "chmod"), 0o600))

	gone := func(n string) func() bool {
		return func() bool {
			// This mount keeps creating in the directory meanwhile.
			testkit.MustOK(t, "create", os.WriteFile(filepath.Join(d, "busy"), nil, 0o644))
			_, err := os.Stat(filepath.Join(d, n))
			return errors.Is(err, fs.ErrNotExist)
		}
	}
	testkit.AwaitCond(t, 10*time.Second, "a file another client removed still shows", gone("gone"))
	testkit.AwaitCond(t, 10*time.Second, "a file another client renamed shows under its old name", gone("moved"))
	testkit.AwaitCond(t, 10*time.Second, "a file another client renamed does not show under its new name", func() bool {
		b, err := os.ReadFile(filepath.Join(d, "moved-to"))
		return err == nil && string(b) == "moved"
	})
	testkit.AwaitCond(t, 10*time.Second, "a chmod by another client does not show", func() bool {
		st, err := os.Stat(filepath.Join(d, "chmod"))
		return err == nil && st.Mode().Perm() == 0o600
	})
}
