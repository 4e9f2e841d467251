package lossyfs_test

import (
	"bufio"
	"bytes"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	_ "modernc.org/sqlite"

	"github.com/plasmafs/plasma/internal/datanode"
	"github.com/plasmafs/plasma/internal/lossyfs"
)

// Child processes: the test binary runs itself with LOSSYFS_CHILD set for
// work that must not happen in the process serving the mount (mmap), or
// that must come from a second process.
func TestMain(m *testing.M) {
	if mode := os.Getenv("LOSSYFS_CHILD"); mode != "" {
		if err := child(mode, os.Args[len(os.Args)-1]); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const sqliteRows = 40

func child(mode, arg string) error {
	switch mode {
	case "pwrite": // write "from-child" at offset 5000 of inherited fd 3
		f := os.NewFile(3, "inherited")
		_, err := f.WriteAt([]byte("from-child"), 5000)
		return err
	case "sqlite-FULL", "sqlite-OFF": // commit rows one by one, report, wait to be killed
		sync := strings.TrimPrefix(mode, "sqlite-")
		db, err := sql.Open("sqlite", "file:"+arg+"?_pragma=journal_mode(WAL)&_pragma=synchronous("+sync+")")
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(1)
		if _, err := db.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)`); err != nil {
			return err
		}
		for i := 0; i < sqliteRows; i++ {
			if _, err := db.Exec(`INSERT INTO t VALUES (?, ?)`, i, strings.Repeat("x", 500)); err != nil {
				return err
			}
		}
		fmt.Println("committed")
		bufio.NewReader(os.Stdin).ReadString('\n') // until killed
		return nil
	case "fuse-fds": // count inherited descriptors of /dev/fuse
		n := 0
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return err
		}
		for _, e := range ents {
			if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l == "/dev/fuse" {
				n++
			}
		}
		fmt.Println(n)
		return nil
	case "sqlite-count":
		db, err := sql.Open("sqlite", "file:"+arg)
		if err != nil {
			return err
		}
		defer db.Close()
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
			if strings.Contains(err.Error(), "no such table") {
				n = 0
			} else {
				return err
			}
		}
		if err := db.QueryRow(`PRAGMA integrity_check`).Scan(new(string)); err != nil {
			return err
		}
		fmt.Println(n)
		return nil
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func childCmd(t *testing.T, mode, arg string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$", arg)
	cmd.Env = append(os.Environ(), "LOSSYFS_CHILD="+mode)
	cmd.Stderr = os.Stderr
	return cmd
}

// testFS is a mount over a backing directory that can be power-cut and
// mounted again.
type testFS struct {
	t       *testing.T
	backing string
	mnt     string
	fs      *lossyfs.FS
}

func mount(t *testing.T) *testFS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("lossyfs needs root (FUSE mounts); CI runs as root")
	}
	dir := t.TempDir()
	m := &testFS{t: t, backing: filepath.Join(dir, "backing"), mnt: filepath.Join(dir, "mnt")}
	for _, d := range []string{m.backing, m.mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m.remount()
	t.Cleanup(func() {
		if err := m.fs.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return m
}

func (m *testFS) remount() {
	m.t.Helper()
	f, err := lossyfs.Mount(m.backing, m.mnt)
	if err != nil {
		m.t.Fatal(err)
	}
	m.fs = f
}

// cut cuts the power and mounts the backing directory again.
func (m *testFS) cut() {
	m.t.Helper()
	if err := m.fs.Cut(); err != nil {
		m.t.Fatalf("cut: %v", err)
	}
	m.remount()
}

func (m *testFS) path(name string) string { return filepath.Join(m.mnt, name) }

func (m *testFS) read(name string) []byte {
	m.t.Helper()
	b, err := os.ReadFile(m.path(name))
	if err != nil {
		m.t.Fatal(err)
	}
	return b
}

func fdatasync(t *testing.T, f *os.File) {
	t.Helper()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatalf("fdatasync: %v", err)
	}
}

func TestUnsyncedWriteIsLost(t *testing.T) {
	m := mount(t)
	if err := os.WriteFile(m.path("f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := m.read("f"); string(got) != "hello" {
		t.Fatalf("before the cut: %q", got)
	}
	m.cut()
	// The name passes through; the data did not.
	if got := m.read("f"); len(got) != 0 {
		t.Fatalf("after the cut: %q, want empty", got)
	}
}

func TestSyncedWriteSurvives(t *testing.T) {
	m := mount(t)
	f, err := os.Create(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("durable"))
	fdatasync(t, f)
	f.Write([]byte("+volatile"))
	if st, _ := f.Stat(); st.Size() != int64(len("durable+volatile")) {
		t.Fatalf("size before the cut: %d", st.Size())
	}
	f.Close()
	// A second handle sees (and may sync) what the first wrote.
	if got := m.read("f"); string(got) != "durable+volatile" {
		t.Fatalf("before the cut: %q", got)
	}
	m.cut()
	if got := m.read("f"); string(got) != "durable" {
		t.Fatalf("after the cut: %q, want %q", got, "durable")
	}
	// fsync on a new descriptor syncs what an earlier, closed one wrote.
	if err := os.WriteFile(m.path("g"), []byte("later"), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(m.path("g"))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	g.Close()
	m.cut()
	if got := m.read("g"); string(got) != "later" {
		t.Fatalf("after the cut: %q, want %q", got, "later")
	}
}

func TestTruncateThenExtendReadsZeros(t *testing.T) {
	m := mount(t)
	orig := bytes.Repeat([]byte("0123456789"), 1000) // 10000 bytes
	f, err := os.OpenFile(m.path("f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { f.Close() }()
	f.WriteAt(orig, 0)
	fdatasync(t, f)

	want := append([]byte(nil), orig[:100]...)
	want = append(want, make([]byte, 9900)...)
	copy(want[5000:], "mid")
	if err := f.Truncate(100); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10000); err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("mid"), 5000)
	if got := m.read("f"); !bytes.Equal(got, want) {
		t.Fatalf("truncate, extend, write: read back differs (len %d)", len(got))
	}
	// Not synced: the cut brings back the original.
	f.Close()
	m.cut()
	if got := m.read("f"); !bytes.Equal(got, orig) {
		t.Fatal("unsynced truncate survived the cut")
	}
	// Now the same, synced (truncate by path, then O_TRUNC, then extend).
	if err := os.Truncate(m.path("f"), 100); err != nil {
		t.Fatal(err)
	}
	if got := m.read("f"); !bytes.Equal(got, orig[:100]) {
		t.Fatalf("after truncate(2): %d bytes", len(got))
	}
	if f, err = os.OpenFile(m.path("f"), os.O_RDWR|os.O_TRUNC, 0); err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("end"), 9997)
	want = make([]byte, 10000)
	copy(want[9997:], "end")
	fdatasync(t, f)
	f.Close()
	m.cut()
	if got := m.read("f"); !bytes.Equal(got, want) {
		t.Fatalf("synced truncate+extend: %d bytes, differs", len(got))
	}
}

// TestRandomOpsMatchModel runs random writes, truncates, fallocates and
// syncs against a model: reads must match the model of the page cache, and
// after a cut the file must match the model of the last sync.
func TestRandomOpsMatchModel(t *testing.T) {
	m := mount(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 4; round++ {
		f, err := os.OpenFile(m.path("f"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		cache := m.read("f")
		durable := append([]byte(nil), cache...)
		for op := 0; op < 300; op++ {
			switch r := rng.IntN(10); {
			case r < 5:
				off := rng.IntN(40000)
				b := make([]byte, 1+rng.IntN(9000))
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				if _, err := f.WriteAt(b, int64(off)); err != nil {
					t.Fatal(err)
				}
				if end := off + len(b); end > len(cache) {
					cache = append(cache, make([]byte, end-len(cache))...)
				}
				copy(cache[off:], b)
			case r < 7:
				n := rng.IntN(45000)
				if err := f.Truncate(int64(n)); err != nil {
					t.Fatal(err)
				}
				if n < len(cache) {
					cache = cache[:n]
				} else {
					cache = append(cache, make([]byte, n-len(cache))...)
				}
			case r < 8:
				n := rng.IntN(45000)
				if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(n)); err != nil {
					t.Fatal(err)
				}
				if n > len(cache) {
					cache = append(cache, make([]byte, n-len(cache))...)
				}
			case r < 9:
				fdatasync(t, f)
				durable = append(durable[:0], cache...)
			default:
				off, n := rng.IntN(45000), rng.IntN(10000)
				got := make([]byte, n)
				k, _ := f.ReadAt(got, int64(off))
				want := []byte{}
				if off < len(cache) {
					want = cache[off:min(off+n, len(cache))]
				}
				if !bytes.Equal(got[:k], want) {
					t.Fatalf("round %d op %d: read %d+%d differs from the model", round, op, off, n)
				}
			}
		}
		if got := m.read("f"); !bytes.Equal(got, cache) {
			t.Fatalf("round %d: file (%d bytes) differs from the model (%d bytes)", round, len(got), len(cache))
		}
		f.Close()
		m.cut()
		if got := m.read("f"); !bytes.Equal(got, durable) {
			t.Fatalf("round %d: after the cut, file (%d bytes) differs from the last sync (%d bytes)", round, len(got), len(durable))
		}
	}
}

// TestBlockStore drives the datanode's block store (fallocated volume,
// pwrite + sync_file_range, fdatasync) on the mount.
func TestBlockStore(t *testing.T) {
	m := mount(t)
	const bs = 64 << 10
	vol := m.path("vol")
	if _, err := datanode.InitWith(vol, "test", bs, 64*bs, datanode.PreallocFallocate); err != nil {
		t.Fatal(err)
	}
	// InitWith makes the volume durable itself (no m.fs.Sync here).
	st, err := datanode.OpenBlockStore(vol)
	if err != nil {
		t.Fatal(err)
	}
	block := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, bs-i) }
	for i := 0; i < 4; i++ {
		if err := st.Write(uint64(i), block(i), datanode.Checksum(block(i), bs), uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := 4; i < 8; i++ {
		if err := st.Write(uint64(i), block(i), datanode.Checksum(block(i), bs), uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, bs)
	if _, err := st.Read(7, buf, datanode.NoTicket); err != nil {
		t.Fatalf("read of an unsynced block before the cut: %v", err)
	}
	st.Close()
	m.cut()
	if st, err = datanode.OpenBlockStore(vol); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := 0; i < 8; i++ {
		_, err := st.Read(uint64(i), buf, datanode.NoTicket)
		synced := i < 4
		if synced && (err != nil || !bytes.Equal(buf[:bs-i], block(i))) {
			t.Errorf("synced block %d: err %v, content ok %v", i, err, bytes.Equal(buf[:bs-i], block(i)))
		}
		if !synced && err == nil && bytes.Equal(buf[:bs-i], block(i)) {
			t.Errorf("unsynced block %d survived the cut", i)
		}
	}
}

// TestPassedDescriptor: another process writes through a descriptor it
// got from this one (as a local client writes into the datanode's block
// file); this process's fdatasync makes it durable.
func TestPassedDescriptor(t *testing.T) {
	m := mount(t)
	for _, sync := range []bool{false, true} {
		name := fmt.Sprintf("f-%v", sync)
		f, err := os.OpenFile(m.path(name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Fallocate(int(f.Fd()), 0, 0, 8192); err != nil {
			t.Fatal(err)
		}
		fdatasync(t, f)
		cmd := childCmd(t, "pwrite", "")
		cmd.ExtraFiles = []*os.File{f}
		if out, err := cmd.Output(); err != nil {
			t.Fatalf("child: %v %s", err, out)
		}
		got := make([]byte, 10)
		f.ReadAt(got, 5000)
		if string(got) != "from-child" {
			t.Fatalf("the child's write is not visible: %q", got)
		}
		if sync {
			fdatasync(t, f)
		}
		f.Close()
		m.cut()
		b := m.read(name)
		if len(b) != 8192 {
			t.Fatalf("size after the cut: %d", len(b))
		}
		if survived := string(b[5000:5010]) == "from-child"; survived != sync {
			t.Errorf("synced %v: the child's write survived the cut: %v", sync, survived)
		}
	}
}

// TestSQLite: a WAL database written by another process (SQLite maps the
// -shm file and takes POSIX locks) keeps every committed row across a cut
// with synchronous=FULL, and loses committed rows with synchronous=OFF.
func TestSQLite(t *testing.T) {
	m := mount(t)
	for _, sync := range []string{"FULL", "OFF"} {
		db := m.path("db-" + sync)
		cmd := childCmd(t, "sqlite-"+sync, db)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if strings.TrimSpace(line) != "committed" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("synchronous=%s: child did not commit: %q %v", sync, line, err)
		}
		// The power goes: the process dies with the machine.
		cmd.Process.Kill()
		cmd.Wait()
		stdin.Close()
		m.cut()
		out, err := childCmd(t, "sqlite-count", db).Output()
		if err != nil {
			t.Fatalf("synchronous=%s: count: %v", sync, err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		t.Logf("synchronous=%s: %d of %d committed rows after the cut", sync, n, sqliteRows)
		if sync == "FULL" && n != sqliteRows {
			t.Errorf("synchronous=FULL: %d of %d committed rows survived", n, sqliteRows)
		}
		if sync == "OFF" && n == sqliteRows {
			t.Errorf("synchronous=OFF: all %d committed rows survived the cut; the filesystem keeps unsynced data", n)
		}
	}
}

// TestCutWithOpenFile: a cut while a file is open (by this process)
// still unmounts, and the descriptor fails afterwards.
func TestCutWithOpenFile(t *testing.T) {
	m := mount(t)
	f, err := os.Create(m.path("open"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	m.cut()
	if _, err := f.Write([]byte("y")); err == nil {
		t.Error("write through a descriptor from before the cut succeeded")
	}
	f.Close()
	if got := m.read("open"); len(got) != 0 {
		t.Fatalf("after the cut: %q", got)
	}
}

// TestChildrenDoNotInheritTheDevice: processes started after the mount do
// not hold /dev/fuse, which would keep the connection alive (and the
// mount hanging) after the serving process died.
func TestChildrenDoNotInheritTheDevice(t *testing.T) {
	m := mount(t)
	m.cut() // and a second mount
	out, err := childCmd(t, "fuse-fds", "").Output()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.TrimSpace(string(out)); n != "0" {
		t.Fatalf("a child process holds %s descriptors of /dev/fuse", n)
	}
}
