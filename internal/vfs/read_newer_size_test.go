package vfs_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/vfs"
)

// TestReadReachesTheSizeGetAttrShows: a handle whose transaction reads an
// older, shorter version of a file, after GetAttr showed the newer, longer
// one (appended through another mount), reads up to the size GetAttr
// showed. A short read there made the kernel fill the rest of the page with
// zeros that are nowhere in the file (tail -f through a second mount saw
// them, TestExtensionFUSEAppends).
func TestReadReachesTheSizeGetAttrShows(t *testing.T) {
	ip := clustertest.StartInProcess(t, clustertest.Options{})
	c := ip.Client(t)
	ctx := context.Background()
	writer := vfs.New(c, vfs.Options{})
	defer writer.Close()
	reader := vfs.New(c, vfs.Options{TTL: -1})
	defer reader.Close()

	first := bytes.Repeat([]byte("a"), 100)
	a, w, err := writer.Create(ctx, vfs.RootIno, "log", 0o644, os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Write(ctx, w, first, 0); err != nil {
		t.Fatal(err)
	}
	if err := writer.Release(ctx, w); err != nil {
		t.Fatal(err)
	}

	r, err := reader.Open(ctx, a.Ino, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Release(ctx, r)
	buf := make([]byte, 16)
	if n, err := reader.Read(ctx, r, buf, 0); err != nil || n != 16 {
		t.Fatalf("first read: %d bytes, %v", n, err)
	}

	more := bytes.Repeat([]byte("b"), 5000)
	w, err = writer.Open(ctx, a.Ino, os.O_RDWR|os.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Write(ctx, w, more, 0); err != nil {
		t.Fatal(err)
	}
	if err := writer.Release(ctx, w); err != nil {
		t.Fatal(err)
	}

	want := append(bytes.Clone(first), more...)
	at, err := reader.GetAttr(ctx, a.Ino)
	if err != nil || at.Size != int64(len(want)) {
		t.Fatalf("GetAttr through the reading mount: size %d, %v; want %d", at.Size, err, len(want))
	}
	got := make([]byte, len(want))
	n, err := reader.Read(ctx, r, got, 0)
	if err != nil || n != len(want) || !bytes.Equal(got[:n], want) {
		t.Fatalf("read through the handle opened before the append: %d bytes, %v; GetAttr showed %d", n, err, len(want))
	}
}
