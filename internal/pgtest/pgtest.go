// Package pgtest starts throwaway PostgreSQL servers for tests
// (internal/pgserver) in new temporary directories. Without the server
// programs a test fails, naming 'make deps'.
package pgtest

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/plasmafs/plasma/internal/pgserver"
)

// Server is a running throwaway PostgreSQL server.
type Server struct {
	*pgserver.Server
	dbs atomic.Int64
}

// Start starts a server for t (fsync off: tests kill processes, never
// the machine), stopped and removed when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, false)
}

// StartDurable is Start with PostgreSQL's fsync on (measurements).
func StartDurable(t testing.TB) *Server {
	t.Helper()
	return start(t, true)
}

func start(t testing.TB, durable bool) *Server {
	t.Helper()
	if _, err := pgserver.Bin(); err != nil {
		t.Fatalf("%v (run 'make deps')", err)
	}
	// Short (a socket path has at most 107 bytes) and traversable by
	// user postgres (t.TempDir's parents are not).
	dir, err := os.MkdirTemp("", "pg")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := pgserver.Init(dir, durable)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
		os.RemoveAll(dir)
	})
	return &Server{Server: srv}
}

// CreateDB creates a new, empty database and returns its URL.
func (s *Server) CreateDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("plasma%d", s.dbs.Add(1))
	if err := s.Exec("postgres", "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return s.URL(name)
}
