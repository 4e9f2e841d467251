package mount

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestOpenSeesOtherMountsSize: close-to-open consistency covers the size
// too. A file another mount grew and closed opens in this mount with its
// new size (fstat on the new descriptor, reads to its end), even while
// this mount has its old attributes cached (a long cache timeout).
// Before, the open read the new version's bytes but the kernel was shown
// the cached size: reads stopped at the old end, and SQLite reading a
// database another mount had just written said "database disk image is
// malformed".
func TestOpenSeesOtherMountsSize(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	writer := testkit.StartMount(t, c)
	reader := testkit.StartMount(t, c, "ttl=1h")
	data := testkit.RandomBytes(t, 100_000)
	testkit.MustOK(t, "write f", os.WriteFile(writer.Path("f"), data, 0o644))
	for round := 0; round < 3; round++ {
		// The reader caches f's attributes (and pages).
		got, err := os.ReadFile(reader.Path("f"))
		testkit.MustOK(t, "read f through the second mount", err)
		if !bytes.Equal(got, data) {
			t.Fatalf("round %d: second mount read %d bytes of f, not the %d written and closed", round, len(got), len(data))
		}
		more := testkit.RandomBytes(t, 70_001)
		f, err := os.OpenFile(writer.Path("f"), os.O_WRONLY|os.O_APPEND, 0)
		testkit.MustOK(t, "open f to append", err)
		_, err = f.Write(more)
		testkit.MustOK(t, "append to f", err)
		testkit.MustOK(t, "close f", f.Close())
		data = append(data, more...)

		r, err := os.Open(reader.Path("f"))
		testkit.MustOK(t, "open f through the second mount", err)
		st, err := r.Stat()
		testkit.MustOK(t, "fstat f through the second mount", err)
		got, err = io.ReadAll(r)
		r.Close()
		testkit.MustOK(t, "read f through the second mount", err)
		if st.Size() != int64(len(data)) || !bytes.Equal(got, data) {
			t.Fatalf("round %d: after the other mount appended and closed, this mount's open showed size %d and read %d bytes (a prefix: %v), not the %d bytes of the file",
				round, st.Size(), len(got), bytes.HasPrefix(data, got), len(data))
		}
	}
}
