package postgres

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/pgtest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// migrationTree writes files (two replicas each) under /m and returns
// their contents by path.
func migrationTree(t *testing.T, cl *client.Client, tag string, n int) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	testkit.MustOK(t, "mkdir", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		if _, err := tx.Lstat(ctx, "/m"); err == nil {
			return nil
		}
		_, err := tx.Mkdir(ctx, "/m", 0o755)
		return err
	}))
	r := rand.New(rand.NewSource(int64(n)))
	files := map[string][]byte{}
	for i := 0; i < n; i++ {
		data := make([]byte, 1000+r.Intn(200<<10))
		r.Read(data)
		path := fmt.Sprintf("/m/%s%02d", tag, i)
		testkit.WriteRep2(t, cl, path, data)
		files[path] = data
	}
	return files
}

// sameFiles checks the tree as a client sees it and every file's data.
func sameFiles(t *testing.T, c *clustertest.Procs, wantTree string, files map[string][]byte) {
	t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	if got := clustertest.Tree(t, cl); got != wantTree {
		t.Fatalf("tree after migration:\n%s\nwant:\n%s", got, wantTree)
	}
	ctx := context.Background()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	for path, data := range files {
		f, err := tx.Open(ctx, path)
		testkit.MustOK(t, "open "+path, err)
		got, err := io.ReadAll(f)
		testkit.MustOK(t, "read "+path, err)
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes read back, want the %d written", path, len(got), len(data))
		}
	}
}

// TestPostgresMigrationRoundTrip: 'plasma namenode migrate' copies a
// namespace from SQLite to PostgreSQL (commits only in the commit log
// included) and back; a namenode on each copy serves the same tree and
// data, and the views answer for it in PostgreSQL.
func TestPostgresMigrationRoundTrip(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.CreateDB(t)
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{})
	files := migrationTree(t, cl, "s", 6)
	tree := clustertest.Tree(t, cl)
	cl.Close()
	c.Kill(c.NN) // the log holds what the database may lack

	sqlite := filepath.Join(c.Dir, "namenode.db")
	out := c.MustRun("namenode", "migrate", "-from", sqlite, "-to", url)
	if !strings.Contains(out, "every table compared equal") {
		t.Fatalf("migrate said:\n%s", out)
	}
	pgLog := filepath.Join(t.TempDir(), "nn.log")
	c.Opts.NamenodeArgs = []string{"-db", url, "-log", pgLog}
	c.StartNamenode()
	c.WaitLive(2)
	sameFiles(t, c, tree, files)

	// The views answer for this tree.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	testkit.MustOK(t, "connect", err)
	defer conn.Close(ctx)
	var owner string
	testkit.MustOK(t, "owner", conn.QueryRow(ctx, `SELECT owner FROM files WHERE path = '/m/s00'`).Scan(&owner))
	rows, _ := conn.Query(ctx, `SELECT path, size FROM files WHERE owner = $1 ORDER BY path`, owner)
	bySize, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Path string
		Size int64
	}])
	testkit.MustOK(t, "files by owner", err)
	if len(bySize) != len(files) {
		t.Fatalf("files of %s: %v, want %d", owner, bySize, len(files))
	}
	for _, f := range bySize {
		if int64(len(files[f.Path])) != f.Size {
			t.Fatalf("files view: %s has size %d, want %d", f.Path, f.Size, len(files[f.Path]))
		}
	}
	for _, node := range []int{1, 2} {
		rows, _ := conn.Query(ctx, `SELECT path FROM files_on_datanode WHERE node = $1 ORDER BY path`, node)
		paths, err := pgx.CollectRows(rows, pgx.RowTo[string])
		testkit.MustOK(t, "files on datanode", err)
		if len(paths) != len(files) { // two replicas on two datanodes: every file on each
			t.Fatalf("files on datanode %d: %v, want all %d", node, paths, len(files))
		}
	}

	// More commits on PostgreSQL, then back to SQLite.
	cl = c.Client(client.Config{})
	for p, d := range migrationTree(t, cl, "p", 3) {
		files[p] = d
	}
	tree = clustertest.Tree(t, cl)
	cl.Close()
	c.Kill(c.NN)
	back := filepath.Join(t.TempDir(), "back.db")
	out = c.MustRun("namenode", "migrate", "-from", url, "-from-log", pgLog, "-to", back)
	if !strings.Contains(out, "every table compared equal") {
		t.Fatalf("migrate back said:\n%s", out)
	}
	c.Opts.NamenodeArgs = []string{"-db", back}
	c.StartNamenode()
	c.WaitLive(2)
	sameFiles(t, c, tree, files)
}

// TestPostgresStoreOfAnotherNamespaceRefused: a namenode whose -db names
// another namespace's database than its commit log belongs to is refused
// at start, saying so.
func TestPostgresStoreOfAnotherNamespaceRefused(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.CreateDB(t)
	log := filepath.Join(t.TempDir(), "nn.log")
	c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-db", url, "-log", log}})
	c.Kill(c.NN)
	other := pg.CreateDB(t)
	s, err := meta.Open(context.Background(), other, meta.OpenOptions{Format: true})
	testkit.MustOK(t, "format another namespace", err)
	s.Close()
	cmd := exec.Command(c.Bin, "namenode", "-listen", "127.0.0.1:0", "-security", "none", "-db", other, "-log", log)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	testkit.MustOK(t, "start", cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("a namenode on another namespace's database kept running:\n%s", out.String())
	}
	if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(out.String(), "-db names another namenode's database") {
		t.Fatalf("exit %d:\n%s", cmd.ProcessState.ExitCode(), out.String())
	}
	if strings.Contains(out.String(), "goroutine ") {
		t.Fatalf("a stack trace:\n%s", out.String())
	}
}
