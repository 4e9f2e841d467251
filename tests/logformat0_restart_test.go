package tests

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestNamenodeStartsOnLogFormat0: a namenode process started on a data
// directory written before the commit log had format versions (the golden
// checkpoint database with none of the log applied, and the log) replays
// the log and serves every file the namenode that wrote it served.
func TestNamenodeStartsOnLogFormat0(t *testing.T) {
	const golden = "../internal/meta/testdata/logformat0"
	dir := t.TempDir()
	for _, name := range []string{"namenode.db", "namenode.db.log"} {
		b, err := os.ReadFile(filepath.Join(golden, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logFile, err := os.Create(filepath.Join(dir, "namenode.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(clustertest.Binary(t), "namenode", "-listen", addr, "-db", filepath.Join(dir, "namenode.db"),
		"-cluster", "golden", "-blocksize", "65536", "-security", "none", "-log-level", "warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	out := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("namenode exited during start-up (%v):\n%s", err, out())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("namenode not listening after 60s:\n%s", out())
		}
	}
	cl, err := client.New(context.Background(), client.Config{Namenodes: []string{addr}, Security: "none", DataSecurity: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want, err := os.ReadFile(filepath.Join(golden, "expected-tree.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := clustertest.Tree(t, cl); got != string(want) {
		t.Errorf("namespace differs from the golden one:\n got:\n%s\nwant:\n%s\nnamenode output:\n%s", got, want, out())
	}
}
