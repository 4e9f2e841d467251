package kv_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"go.uber.org/goleak"
)

// exampleCluster is an in-process cluster for the examples.
var exampleCluster *clustertest.InProcess

type mainTB struct{ cleanups []func() }

func (m *mainTB) Helper()                   {}
func (m *mainTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (m *mainTB) Cleanup(f func())          { m.cleanups = append(m.cleanups, f) }
func (m *mainTB) TempDir() string {
	d, err := os.MkdirTemp("", "plasma-kv-example-")
	if err != nil {
		panic(err)
	}
	m.Cleanup(func() { os.RemoveAll(d) })
	return d
}

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

// TestMain runs the tests and examples, then fails if a goroutine is left
// running (a snapshot's transaction, a refresher, a stream fetch).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(withExampleCluster{m})
}

// connect returns a client of the example cluster.
func connect() *client.Client {
	c, err := client.New(context.Background(), client.Config{Namenodes: []string{exampleCluster.Addr}, Security: "none", DataSecurity: "none"})
	if err != nil {
		panic(err)
	}
	return c
}
