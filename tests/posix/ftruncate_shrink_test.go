package posix

import (
	"bytes"
	"context"
	"io"
	"os"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestFtruncateShrinkAfterGrow (issue 19 item 8b): in one open file of a
// cluster with 64 KiB blocks, grow a 100,000-byte file to 131,072 bytes
// and shrink it to 50,000 (into an earlier block): both succeed, and the
// file reads its first 50,000 bytes; grown again, zeros follow. Through
// the client library and through the mount (ftruncate(2)).
func TestFtruncateShrinkAfterGrow(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Blocksize: 64 << 10})
	data := testkit.SeededBytes(100000, 81)
	want := append(bytes.Clone(data[:50000]), make([]byte, 20000)...)

	t.Run("client", func(t *testing.T) {
		cl := c.Client(client.Config{})
		defer cl.Close()
		ctx := context.Background()
		testkit.MustOK(t, "write", libTarget{cl, "/"}.writeFile("lib", data))
		testkit.MustOK(t, "truncates", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, "/lib")
			if err != nil {
				return err
			}
			for _, size := range []int64{131072, 50000, 70000} {
				if err := f.Truncate(size); err != nil {
					return err
				}
			}
			got, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
			if err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				t.Errorf("in the transaction: read %d bytes, not the 70,000 expected", len(got))
			}
			return f.Close()
		}))
		if got := testkit.ReadWhole(t, cl, "/lib"); !bytes.Equal(got, want) {
			t.Errorf("committed: read %d bytes, not the 70,000 expected", len(got))
		}
	})

	t.Run("mount", func(t *testing.T) {
		m := testkit.StartMount(t, c)
		p := m.Path("mnt")
		testkit.MustOK(t, "write", os.WriteFile(p, data, 0o644))
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		testkit.MustOK(t, "open", err)
		defer f.Close()
		for _, size := range []int64{131072, 50000, 70000} {
			if err := syscall.Ftruncate(int(f.Fd()), size); err != nil {
				t.Fatalf("ftruncate(%d): %v", size, err)
			}
		}
		testkit.MustOK(t, "close", f.Close())
		got, err := os.ReadFile(p)
		testkit.MustOK(t, "read", err)
		if !bytes.Equal(got, want) {
			t.Errorf("read %d bytes, not the 70,000 expected", len(got))
		}
	})
}
