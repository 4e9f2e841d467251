// Package pgserver runs a private PostgreSQL server (Debian's postgresql
// package: initdb and pg_ctl, as user postgres when run as root, since
// PostgreSQL refuses to run as root) in a directory of its own, listening
// only on a Unix socket there (no port to collide with). 'cluster up
// -store postgres' and the tests use it; it installs nothing.
package pgserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a PostgreSQL cluster in Dir (data in Dir/data, the socket and
// server.log in Dir).
type Server struct {
	Dir string
	Bin string // directory of initdb, pg_ctl, pg_dump...
	// Durable keeps PostgreSQL's fsync on; without it (tests, which kill
	// processes, never the machine) fsync is off.
	Durable bool
	port    int
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
	return "", fmt.Errorf("the PostgreSQL server programs (initdb, pg_ctl) are not installed: install Debian's postgresql package (apt-get install postgresql; 'make deps' does)")
}

func version(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// Init returns the server in dir, creating the directory and the
// database cluster (initdb) unless they exist. It does not start it.
func Init(dir string, durable bool) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Bin: bin, Durable: durable, port: 5432}
	if err := chownToPostgres(dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(s.data(), "PG_VERSION")); err != nil {
		if err := s.run("initdb", "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

// Running reports whether the server runs (pg_ctl status).
func (s *Server) Running() bool { return s.run("pg_ctl", "-D", s.data(), "status") == nil }

// Start starts the (stopped) server and waits until it accepts
// connections.
func (s *Server) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=", s.port, s.Dir)
	if !s.Durable {
		opts += " -c fsync=off -c full_page_writes=off"
	}
	return s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.Dir, "server.log"), "-w", "-t", "120", "-o", opts, "start")
}

// Stop stops the server (fast shutdown: connections are cut), if it runs.
func (s *Server) Stop() error {
	if _, err := os.Stat(filepath.Join(s.data(), "postmaster.pid")); err != nil {
		return nil
	}
	return s.run("pg_ctl", "-D", s.data(), "-m", "fast", "-w", "-t", "120", "stop")
}

// URL is the URL of database db as the superuser postgres.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres:///%s?host=%s&port=%d&user=postgres&sslmode=disable", db, s.Dir, s.port)
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

// EnsureDB creates database db unless it exists.
func (s *Server) EnsureDB(db string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL in %s: %w", s.Dir, err)
	}
	defer c.Close(ctx)
	var exists bool
	if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, db).Scan(&exists); err != nil || exists {
		return err
	}
	_, err = c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize())
	return err
}

// run runs one of the server programs, as user postgres when root.
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
		if len(log) > 2000 {
			log = log[len(log)-2000:]
		}
		return fmt.Errorf("%s %v: %w\n%s\nserver.log (%s):\n%s", prog, args, err, out, filepath.Join(s.Dir, "server.log"), log)
	}
	return nil
}

// chownToPostgres gives dir to user postgres when running as root.
func chownToPostgres(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("user postgres: %w (install Debian's postgresql package, which creates it)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

// At returns the server initialised in dir earlier (by Init), or an
// error if there is none.
func At(dir string) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Bin: bin, port: 5432}
	if _, err := os.Stat(filepath.Join(s.data(), "PG_VERSION")); err != nil {
		return nil, fmt.Errorf("no PostgreSQL server in %s: %w", dir, err)
	}
	return s, nil
}
