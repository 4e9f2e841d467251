package mount

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMountPowerCutKeepsFsynced: through a FUSE mount with two replicas,
// a log grows by small appends, each fsynced, and a database-like file
// has pages overwritten in place, each fsynced; then the mount process is
// killed and the power fails. After the restart both files hold at least
// everything fsynced (the log exactly a prefix of what was appended), and
// fsck is clean. The volumes are small and were filled and emptied first,
// so the short blocks land in slots that hold old bytes.
func TestMountPowerCutKeepsFsynced(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.StartPowerCut(t, clustertest.Options{Datanodes: 2, Size: 32 << 20})
	m := testkit.StartMount(t, c.Procs, "rep=2")
	rng := rand.New(rand.NewSource(7))

	// Old bytes in most slots of both volumes.
	filler := make([]byte, 24<<20)
	rng.Read(filler)
	testkit.MustOK(t, "write filler", os.WriteFile(m.Path("filler"), filler, 0o644))
	testkit.MustOK(t, "remove filler", os.Remove(m.Path("filler")))
	testkit.MustOK(t, "syncfs", syncFS(m.Dir))

	// The log: appends of 1..300 bytes, each fsynced.
	logf, err := os.OpenFile(m.Path("log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	testkit.MustOK(t, "create log", err)
	var appended []byte
	appendSynced := func(n int) {
		for i := 0; i < n; i++ {
			rec := make([]byte, 1+rng.Intn(300))
			rng.Read(rec)
			_, err := logf.Write(rec)
			testkit.MustOK(t, "append", err)
			testkit.MustOK(t, "fsync log", logf.Sync())
			appended = append(appended, rec...)
		}
	}
	appendSynced(150)

	// The database: 3 blocks and a bit, pages rewritten in place.
	db := make([]byte, 3*64<<10+5000)
	rng.Read(db)
	dbf, err := os.OpenFile(m.Path("db"), os.O_RDWR|os.O_CREATE, 0o644)
	testkit.MustOK(t, "create db", err)
	_, err = dbf.WriteAt(db, 0)
	testkit.MustOK(t, "write db", err)
	testkit.MustOK(t, "fsync db", dbf.Sync())
	for i := 0; i < 40; i++ {
		off := rng.Intn(len(db)/4096) * 4096
		page := make([]byte, min(4096, len(db)-off))
		rng.Read(page)
		_, err := dbf.WriteAt(page, int64(off))
		testkit.MustOK(t, "overwrite page", err)
		testkit.MustOK(t, "fsync db", dbf.Sync())
		copy(db[off:], page)
	}
	// More appends to the log, the last fsyncs before the power cut (each
	// extends the log's last block in place: its own sync must cover it).
	appendSynced(5)
	synced := len(appended)
	// Appended after the last fsync: may be lost.
	tail := make([]byte, 500)
	rng.Read(tail)
	_, err = logf.Write(tail)
	testkit.MustOK(t, "append unsynced", err)
	appended = append(appended, tail...)

	m.Signal(syscall.SIGKILL)
	m.Wait()
	logf.Close()
	dbf.Close()
	c.MustRun("umount", "-f", m.Dir)
	c.PowerCut()

	cl := c.Client(client.Config{})
	defer cl.Close()
	read := func(name string) []byte {
		t.Helper()
		ctx := context.Background()
		tx := cl.Begin()
		testkit.MustOK(t, "begin", err)
		defer tx.Abort(ctx)
		f, err := tx.Open(ctx, name)
		testkit.MustOK(t, "open "+name, err)
		b, err := io.ReadAll(f)
		testkit.MustOK(t, "read "+name, err)
		return b
	}
	got := read("/log")
	if len(got) < synced || len(got) > len(appended) || !bytes.Equal(got, appended[:len(got)]) {
		t.Fatalf("log after the power cut: %d bytes, fsynced %d, appended %d; a prefix of the appends: %v",
			len(got), synced, len(appended), len(got) <= len(appended) && bytes.Equal(got, appended[:len(got)]))
	}
	if got := read("/db"); !bytes.Equal(got, db) {
		t.Fatalf("db after the power cut: %d bytes, differs from the %d fsynced", len(got), len(db))
	}
	c.MustRun("fsck")
}

// syncFS is syncfs(2) of the filesystem holding dir.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
