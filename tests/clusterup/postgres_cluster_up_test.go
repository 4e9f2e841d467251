package clusterup

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/plasmafs/plasma/tests/testkit"
)

// namenodeDB returns the -db of the running namenode whose commit log is
// in dir (a 'cluster up -store postgres' cluster's).
func namenodeDB(t *testing.T, dir string) string {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		var db, log string
		for i := 0; i+1 < len(argv); i++ {
			switch argv[i] {
			case "-db":
				db = argv[i+1]
			case "-log":
				log = argv[i+1]
			}
		}
		if len(argv) > 1 && argv[1] == "namenode" && filepath.Dir(log) == dir {
			return db
		}
	}
	t.Fatalf("no namenode with its commit log in %s", dir)
	return ""
}

// TestClusterUpWithPostgres: 'cluster up -store postgres' starts a
// private PostgreSQL server and a namenode on it; what is committed
// reaches PostgreSQL; 'cluster down' stops the server, and the next
// 'cluster up' (store recorded) starts it again with the namespace kept.
// Changing a cluster's store is refused.
func TestClusterUpWithPostgres(t *testing.T) {
	lc := newLocalCluster(t)
	up := lc.upArgs("-detach", "-datanodes", "1", "-taskserver-slots", "0")
	out, code := lc.run(append(up, "-store", "postgres")...)
	_, after, found := strings.Cut(out, "starting PostgreSQL in ")
	pgDir, _, _ := strings.Cut(after, "\n")
	if found && pgDir != "" {
		// The server's directory (outside the cluster's when root) goes
		// with the test.
		t.Cleanup(func() {
			lc.run("cluster", "down", "-dir", lc.dir)
			os.RemoveAll(pgDir)
		})
	}
	if code != 0 || !found {
		t.Fatalf("cluster up -store postgres: exit %d:\n%s", code, out)
	}
	dbURL := namenodeDB(t, lc.dir)
	if u, err := url.Parse(dbURL); err != nil || u.Query().Get("host") != pgDir {
		t.Fatalf("the namenode's database %s is not in %s", dbURL, pgDir)
	}
	lc.mustRun("mkdir", "/kept")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	testkit.MustOK(t, "connect", err)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var n int
		testkit.MustOK(t, "query", conn.QueryRow(ctx, `SELECT count(*) FROM paths WHERE path = '/kept'`).Scan(&n))
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/kept never reached PostgreSQL")
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	conn.Close(ctx)

	lc.mustRun("cluster", "down", "-dir", lc.dir)
	if _, err := os.Stat(filepath.Join(pgDir, "data", "postmaster.pid")); err == nil {
		t.Fatalf("PostgreSQL in %s still runs after cluster down", pgDir)
	}
	out, code = lc.run(append(up, "-store", "sqlite")...)
	if code == 0 || !strings.Contains(out, "the cluster keeps its metadata in postgres") {
		t.Fatalf("changing the store: exit %d:\n%s", code, out)
	}
	lc.mustRun(up...)
	if out := lc.mustRun("ls", "/"); !strings.Contains(out, "kept") {
		t.Fatalf("after cluster down and up, / holds:\n%s", out)
	}
}
