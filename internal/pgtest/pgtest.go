// Package pgtest starts throwaway PostgreSQL servers for tests: initdb and
// pg_ctl (Debian's postgresql package) as user postgres, in a new
// directory, listening only on a Unix socket there (no port to collide
// with). It installs nothing: without the server programs a test fails,
// naming 'make deps'.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running throwaway PostgreSQL cluster.
type Server struct {
	Dir  string // holds data/, the socket and server.log
	Bin  string // directory of initdb, pg_ctl, postgres
	port int
	dbs  atomic.Int64
	// Durable keeps PostgreSQL's fsync on (Start turns it off: tests
	// kill the namenode, never the machine); benchmarks want it on.
	Durable bool
}

// Bin returns the directory of the PostgreSQL server programs (the newest
// version installed), or an error saying how to install them.
func Bin() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	if len(found) > 0 {
		return filepath.Dir(found[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("the PostgreSQL server programs (initdb, pg_ctl) are not installed: run 'make deps' (it installs Debian's postgresql package)")
}

func version(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// Start starts a server for t, stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, false)
}

// StartDurable is Start with PostgreSQL's fsync on.
func StartDurable(t testing.TB) *Server {
	t.Helper()
	return start(t, true)
}

func start(t testing.TB, durable bool) *Server {
	t.Helper()
	s, err := startIn("", durable)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
		os.RemoveAll(s.Dir)
	})
	return s
}

// StartIn initialises and starts a server in dir (a new temporary
// directory if ""), which must not hold one yet.
func StartIn(dir string) (*Server, error) { return startIn(dir, false) }

func startIn(dir string, durable bool) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	if dir == "" {
		// Short (a socket path has at most 107 bytes) and traversable by
		// postgres (t.TempDir's parents are not).
		if dir, err = os.MkdirTemp("", "pg"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Bin: bin, port: 5432, Durable: durable}
	if err := chownToPostgres(dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		if err := s.run("initdb", "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"); err != nil {
			return nil, err
		}
	}
	return s, s.Start()
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

// Start starts the (stopped) server and waits until it accepts
// connections.
func (s *Server) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=", s.port, s.Dir)
	if !s.Durable {
		opts += " -c fsync=off -c full_page_writes=off"
	}
	return s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.Dir, "server.log"), "-w", "-t", "120", "-o", opts, "start")
}

// Stop stops the server (fast shutdown: connections are cut).
func (s *Server) Stop() error {
	if _, err := os.Stat(filepath.Join(s.data(), "postmaster.pid")); err != nil {
		return nil
	}
	return s.run("pg_ctl", "-D", s.data(), "-m", "fast", "-w", "-t", "120", "stop")
}

// Kill stops the server as a crash would (immediate shutdown: no
// checkpoint; recovery replays its WAL at the next start).
func (s *Server) Kill() error {
	return s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "-t", "120", "stop")
}

// URL is the URL of database db as the superuser postgres.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres:///%s?host=%s&port=%d&user=postgres&sslmode=disable", db, s.Dir, s.port)
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

// Exec runs SQL statements in database db as the superuser.
func (s *Server) Exec(db string, sqls ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", db, err)
	}
	defer c.Close(ctx)
	for _, q := range sqls {
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// run runs one of the server programs as user postgres (PostgreSQL
// refuses to run as root).
func (s *Server) run(prog string, args ...string) error {
	path := filepath.Join(s.Bin, prog)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.Dir, "server.log"))
		return fmt.Errorf("%s %v: %w\n%s\nserver.log:\n%s", prog, args, err, out, tail(log, 2000))
	}
	return nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// chownToPostgres gives dir to user postgres when running as root.
func chownToPostgres(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("user postgres: %w (run 'make deps': Debian's postgresql package creates it)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}
