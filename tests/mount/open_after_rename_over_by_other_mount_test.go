package mount

import (
	"bytes"
	"os"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestOpenAfterRenameOverByOtherMount: a file replaced by another mount
// with a rename over it (how editors and config writers save) opens and
// reads as its new contents in this mount at once, even while this mount
// and the kernel still hold the old name-to-inode entry (a long cache
// timeout): the open of the gone inode answers ESTALE, on which the
// kernel looks the name up again, and the mount answers that lookup from
// the namenode. Before, the open succeeded and the first read failed
// with ESTALE ("Stale file handle" from cat) for the whole timeout.
func TestOpenAfterRenameOverByOtherMount(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	writer := testkit.StartMount(t, c)
	reader := testkit.StartMount(t, c, "ttl=1h")
	oldData := testkit.RandomBytes(t, 200_000)
	newData := testkit.RandomBytes(t, 150_001)
	testkit.MustOK(t, "write f", os.WriteFile(writer.Path("f"), oldData, 0o644))
	// The reader caches the entry and attributes of f (and its pages).
	got, err := os.ReadFile(reader.Path("f"))
	testkit.MustOK(t, "read f through the second mount", err)
	if !bytes.Equal(got, oldData) {
		t.Fatalf("second mount read %d bytes of f, not the %d written", len(got), len(oldData))
	}
	for i := 0; i < 3; i++ {
		testkit.MustOK(t, "write f.new", os.WriteFile(writer.Path("f.new"), newData, 0o644))
		testkit.MustOK(t, "rename f.new over f", os.Rename(writer.Path("f.new"), writer.Path("f")))
		got, err = os.ReadFile(reader.Path("f"))
		testkit.MustOK(t, "read f through the second mount after the rename over it", err)
		if !bytes.Equal(got, newData) {
			t.Fatalf("round %d: second mount read %d bytes of f (old contents: %v), not the %d renamed over it", i, len(got), bytes.Equal(got, oldData), len(newData))
		}
		oldData, newData = newData, oldData
	}
}
