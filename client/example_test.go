package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// exampleCluster is an in-process cluster for the examples.
var exampleCluster *clustertest.InProcess

type mainTB struct{ cleanups []func() }

func (m *mainTB) Helper()                   {}
func (m *mainTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (m *mainTB) Cleanup(f func())          { m.cleanups = append(m.cleanups, f) }
func (m *mainTB) TempDir() string {
	d, err := os.MkdirTemp("", "plasma-example-")
	if err != nil {
		panic(err)
	}
	m.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// withExampleCluster runs the tests with exampleCluster up and stops it
// afterwards (TestMain, in leak_test.go, then checks for goroutine leaks).
type withExampleCluster struct{ m *testing.M }

func (w withExampleCluster) Run() int {
	tb := &mainTB{}
	exampleCluster = clustertest.StartInProcess(tb, clustertest.Options{})
	defer func() {
		for i := len(tb.cleanups) - 1; i >= 0; i-- {
			tb.cleanups[i]()
		}
	}()
	return w.m.Run()
}

func connect() *client.Client {
	c, err := client.New(context.Background(), client.Config{Namenodes: []string{exampleCluster.Addr}, Security: "none", DataSecurity: "none"})
	if err != nil {
		panic(err)
	}
	return c
}

// Write a file and read it back, each in its own transaction.
func ExampleClient_Txn() {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		if _, err := tx.MkdirAll(ctx, "/examples/txn", 0o755); err != nil {
			return err
		}
		f, err := tx.CreateFile(ctx, "/examples/txn/hello.txt", client.CreateOptions{Rep: 2})
		if err != nil {
			return err
		}
		_, err = io.WriteString(f, "hello, plasma\n")
		return err
	})
	if err != nil {
		fmt.Println("write:", err)
		return
	}
	c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, "/examples/txn/hello.txt")
		if err != nil {
			return err
		}
		io.Copy(os.Stdout, f)
		fi, _ := tx.StatInode(ctx, f.Ino())
		fmt.Println(fi.Size, "bytes,", fi.Rep, "replicas")
		return nil
	})
	// Output:
	// hello, plasma
	// 14 bytes, 2 replicas
}

// Copy a stream into a new file; long copies commit as they go.
func ExampleClient_CopyIn() {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	n, err := c.CopyIn(ctx, strings.NewReader(strings.Repeat("x", 200000)), "/examples/copied", client.CopyOptions{})
	fmt.Println(n, err)
	// Output: 200000 <nil>
}

// A second writer of the same name gets ErrConflict at once.
func ExampleErrConflict() {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	a := c.Begin()
	b := c.Begin()
	_, err1 := a.Mkdir(ctx, "/examples-conflict", 0)
	_, err2 := b.Mkdir(ctx, "/examples-conflict", 0)
	fmt.Println(err1, errors.Is(err2, client.ErrConflict))
	a.Commit(ctx)
	b.Abort(ctx)
	// Output: <nil> true
}

// Random writes and reads within one transaction.
func ExampleFile_WriteAt() {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	tx := c.Begin()
	f, _ := tx.CreateFile(ctx, "/examples/random", client.CreateOptions{})
	f.WriteAt([]byte("world"), 6)
	f.WriteAt([]byte("hello,"), 0)
	buf := make([]byte, 11)
	f.ReadAt(buf, 0)
	fmt.Printf("%q\n", buf)
	fmt.Println(tx.Commit(ctx))
	// Output:
	// "hello,world"
	// <nil>
}

// LoadConfig finds the cluster the way the plasma command does: here
// from $PLASMAFS_NAMENODES, else ~/.plasmafs ($PLASMAFS_CONFIG).
func ExampleLoadConfig() {
	os.Setenv("PLASMAFS_NAMENODES", "10.0.0.1:2730,10.0.0.2:2730")
	defer os.Unsetenv("PLASMAFS_NAMENODES")
	cfg, err := client.LoadConfig("", nil)
	fmt.Println(cfg.Namenodes, cfg.Source, err)
	// Output: [10.0.0.1:2730 10.0.0.2:2730] $PLASMAFS_NAMENODES <nil>
}
