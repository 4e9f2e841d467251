package smallfiles

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestLayout2VolumesStillServe: sparse volumes of layout 2 (as the previous
// version made them: the same entries, the config saying layout 2) holding
// a large file and small files open in datanodes of this version: every
// file reads back, fsck is clean, the configs say layout 3, and a deleted
// whole block's pages are then kept.
func TestLayout2VolumesStillServe(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 1 << 20, Size: 64 << 20, Sparse: true})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	big := testkit.SeededBytes(4<<20, 11)
	testkit.WriteFile(t, cl, "/big", big, 2)
	tr := newTree("/s", 200, 50, 12)
	if n, err := tr.write(ctx, cl, 2, 2, 10); err != nil {
		t.Fatalf("after %d files: %v", n, err)
	}
	for _, p := range c.DNs {
		c.Kill(p)
		setVolumeLayout(t, p.Dir, 2)
	}
	for _, p := range c.DNs {
		c.StartDatanode(p)
	}
	c.WaitLive(len(c.DNs))
	if got := testkit.ReadFile(t, cl, "/big"); !bytes.Equal(got, big) {
		t.Fatalf("/big after opening layout-2 volumes: %d bytes, %d differ", len(got), testkit.CountDiff(got, big))
	}
	tr.check(t, ctx, cl, 2)
	testkit.FsckClean(t, cl)
	for _, p := range c.DNs {
		if v := readVolume(t, p.Dir); v.layout != 3 {
			t.Fatalf("volume %s opened by this version still says layout %d", p.Dir, v.layout)
		}
	}
	testkit.MustOK(t, "delete /big", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, "/big") }))
	awaitVolumes(t, c, "the deleted file's pages kept", func(v volumeSlots) bool { return v.kept == 4<<20 })
}

// setVolumeLayout rewrites the layout in a (stopped) volume's config.
func setVolumeLayout(t *testing.T, dir string, layout int) {
	t.Helper()
	path := filepath.Join(dir, "config")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["layout"] = layout
	if b, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
