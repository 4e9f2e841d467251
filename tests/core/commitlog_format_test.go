package core

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/commitlog"
)

// goldenFormat0 is a namenode data directory written before the commit
// log had format versions: the checkpoint database with none of the log
// applied, and the log (see internal/namenode's TestLogReplayGivesNamenodeState).
const goldenFormat0 = "../../internal/meta/testdata/logformat0"

// TestNamenodeStartsOnLogFormat0: a namenode process started on the
// golden format-0 data directory replays its log and serves every file
// the namenode that wrote it served.
func TestNamenodeStartsOnLogFormat0(t *testing.T) {
	dir := copyGoldenDir(t)
	nn := startNamenodeOn(t, dir)
	if err := nn.waitListening(); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(context.Background(), client.Config{Namenodes: []string{nn.addr}, Security: "none", DataSecurity: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want, err := os.ReadFile(filepath.Join(goldenFormat0, "expected-tree.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := clustertest.Tree(t, cl); got != string(want) {
		t.Errorf("namespace differs from the golden one:\n got:\n%s\nwant:\n%s\nnamenode output:\n%s", got, want, nn.output())
	}
}

// TestNamenodeRefusesNewerLogFormat: a log record of a format newer than
// the program's stops the namenode at start-up with an error naming the
// log file and the record's offset, and an exit code that says it failed;
// nothing is misread into the store.
func TestNamenodeRefusesNewerLogFormat(t *testing.T) {
	dir := copyGoldenDir(t)
	logPath := filepath.Join(dir, "namenode.db.log")
	l, err := commitlog.Open(logPath, 0, 1, func(uint64, []byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	off := l.Used()
	// A record of format 99: the version marker, the version, a batch.
	if _, err := l.Append([]byte{0, 99, 1, 0}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	nn := startNamenodeOn(t, dir)
	code := nn.wait()
	out := nn.output()
	if code == 0 {
		t.Fatalf("namenode on a log of a newer format exited 0:\n%s", out)
	}
	for _, want := range []string{logPath, "offset " + strconv.FormatInt(off, 10), "format 99"} {
		if !strings.Contains(out, want) {
			t.Errorf("error does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "goroutine ") {
		t.Errorf("namenode output has a stack trace:\n%s", out)
	}
}

func copyGoldenDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"namenode.db", "namenode.db.log"} {
		b, err := os.ReadFile(filepath.Join(goldenFormat0, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goldenNamenode is a namenode process on a copied golden directory.
type goldenNamenode struct {
	addr    string
	outPath string
	exited  chan int
}

func startNamenodeOn(t *testing.T, dir string) *goldenNamenode {
	t.Helper()
	nn := &goldenNamenode{addr: clustertest.FreeAddr(t), outPath: filepath.Join(dir, "namenode.out"), exited: make(chan int, 1)}
	out, err := os.Create(nn.outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(clustertest.Binary(t), "namenode", "-listen", nn.addr, "-db", filepath.Join(dir, "namenode.db"),
		"-cluster", "golden", "-blocksize", "65536", "-security", "none", "-log-level", "warn")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		cmd.Wait()
		nn.exited <- cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		nn.wait()
	})
	return nn
}

func (nn *goldenNamenode) output() string {
	b, _ := os.ReadFile(nn.outPath)
	return string(b)
}

// wait returns the process's exit code once it exited.
func (nn *goldenNamenode) wait() int {
	code := <-nn.exited
	nn.exited <- code
	return code
}

// waitListening polls until the namenode accepts connections.
func (nn *goldenNamenode) waitListening() error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", nn.addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case code := <-nn.exited:
			nn.exited <- code
			return fmt.Errorf("namenode exited during start-up (exit %d):\n%s", code, nn.output())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return fmt.Errorf("namenode not listening after 60s:\n%s", nn.output())
}
