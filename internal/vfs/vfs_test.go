package vfs_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/vfs"
)

// TestSharedStateAcrossHandles: handles of one file share its transaction
// (a reader sees another handle's uncommitted writes), concurrent reads and
// writes through several handles are safe, and the data is committed by
// the last close.
func TestSharedStateAcrossHandles(t *testing.T) {
	ip := clustertest.StartInProcess(t, clustertest.Options{})
	c := ip.Client(t)
	v := vfs.New(c, vfs.Options{})
	defer v.Close()
	ctx := context.Background()
	a, w, err := v.Create(ctx, vfs.RootIno, "f", 0o644, os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	r, err := v.Open(ctx, a.Ino, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Write(ctx, w, []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	if n, err := v.Read(ctx, r, buf, 0); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("other handle reads %q %v before commit", buf[:n], err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			h, err := v.Open(ctx, a.Ino, os.O_RDWR)
			if err != nil {
				t.Error(err)
				return
			}
			defer v.Release(ctx, h)
			for k := 0; k < 20; k++ {
				if _, err := v.Write(ctx, h, bytes.Repeat([]byte{byte('a' + i)}, 1000), int64(i*1000)); err != nil {
					t.Error(err)
				}
				b := make([]byte, 4000)
				if _, err := v.Read(ctx, h, b, 0); err != nil {
					t.Error(err)
				}
				if _, err := v.GetAttr(ctx, a.Ino); err != nil {
					t.Error(err)
				}
			}
		}(i)
	}
	wg.Wait()
	if err := v.Release(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := v.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	// Another VFS (another mount) sees the committed data.
	v2 := vfs.New(c, vfs.Options{TTL: -1})
	defer v2.Close()
	h, err := v2.Open(ctx, a.Ino, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5000)
	n, err := v2.Read(ctx, h, b, 0)
	if err != nil || n != 4000 {
		t.Fatalf("read %d %v, want 4000 bytes", n, err)
	}
	for i := 0; i < 4; i++ {
		if b[i*1000] != byte('a'+i) {
			t.Fatalf("byte %d is %q", i*1000, b[i*1000])
		}
	}
	v2.Release(ctx, h)
}

// TestErrno maps the client's errors.
func TestErrno(t *testing.T) {
	ip := clustertest.StartInProcess(t, clustertest.Options{})
	c := ip.Client(t)
	v := vfs.New(c, vfs.Options{})
	defer v.Close()
	ctx := context.Background()
	_, err := v.Lookup(ctx, vfs.RootIno, "missing")
	if vfs.Errno(err) != syscall.ENOENT {
		t.Fatalf("lookup missing: %v", err)
	}
	if _, err := v.Mkdir(ctx, vfs.RootIno, "d", 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = v.Mkdir(ctx, vfs.RootIno, "d", 0o755)
	if vfs.Errno(err) != syscall.EEXIST {
		t.Fatalf("mkdir existing: %v", err)
	}
	d, _ := v.Lookup(ctx, vfs.RootIno, "d")
	if _, err := v.Mkdir(ctx, d.Ino, "e", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := v.Rmdir(ctx, vfs.RootIno, "d"); vfs.Errno(err) != syscall.ENOTEMPTY {
		t.Fatalf("rmdir non-empty: %v", err)
	}
	if vfs.Errno(fmt.Errorf("wrapped: %w", syscall.EBADF)) != syscall.EBADF {
		t.Fatal("errno not passed through")
	}
	ro := vfs.New(c, vfs.Options{ReadOnly: true})
	defer ro.Close()
	if _, err := ro.Mkdir(ctx, vfs.RootIno, "x", 0o755); vfs.Errno(err) != syscall.EROFS {
		t.Fatalf("mkdir on a read-only VFS: %v", err)
	}
}
