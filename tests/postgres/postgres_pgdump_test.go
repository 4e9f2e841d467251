package postgres

import (
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/pgtest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestPostgresBackupWithPgDump: pg_dump of a running namenode's database,
// restored with pg_restore into a new database, is a namespace a namenode
// starts on (with a new commit log, its log position cleared), holding
// the tree and data of the moment of the dump, as README's "Backups" says.
func TestPostgresBackupWithPgDump(t *testing.T) {
	pg := pgtest.Start(t)
	dbURL := pg.CreateDB(t)
	u, _ := url.Parse(dbURL)
	db := strings.TrimPrefix(u.Path, "/")
	c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-db", dbURL, "-log", filepath.Join(t.TempDir(), "nn.log")}})
	cl := c.Client(client.Config{})
	files := migrationTree(t, cl, "d", 5)
	tree := clustertest.Tree(t, cl)
	// The dump holds what is checkpointed: wait until that is everything.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	testkit.MustOK(t, "connect", err)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var n int
		testkit.MustOK(t, "count", conn.QueryRow(ctx, `SELECT count(*) FROM files WHERE path LIKE '/m/d%'`).Scan(&n))
		if n == len(files) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL holds %d of %d files after 3 minutes", n, len(files))
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	conn.Close(ctx)

	dump := filepath.Join(t.TempDir(), "plasma.dump")
	if out, err := exec.Command(filepath.Join(pg.Bin, "pg_dump"), "-Fc", "-f", dump, "-d", dbURL).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	migrationTree(t, cl, "after", 2) // committed after the dump: not in the restored namespace
	cl.Close()

	c.Kill(c.NN)
	testkit.MustOK(t, "recreate the database", pg.Exec("postgres", "DROP DATABASE "+db, "CREATE DATABASE "+db))
	if out, err := exec.Command(filepath.Join(pg.Bin, "pg_restore"), "-d", dbURL, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	// Without the old commit log: the restored database forgets its log
	// position (README), and the namenode starts a new log.
	testkit.MustOK(t, "forget the log position", pg.Exec(db, `DELETE FROM counters WHERE name = 'log_seq'`))
	c.Opts.NamenodeArgs = []string{"-db", dbURL, "-log", filepath.Join(t.TempDir(), "new.log")}
	c.StartNamenode()
	c.WaitLive(2)
	sameFiles(t, c, tree, files)
}
