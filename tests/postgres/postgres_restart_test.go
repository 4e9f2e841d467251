package postgres

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/pgtest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// commitFlow commits directory creations, one per durable commit, from
// one client until stopped or refused, and keeps the names acknowledged.
type commitFlow struct {
	mu    sync.Mutex
	acked []string
	stop  chan struct{}
	done  chan struct{}
	err   error
}

func startCommitFlow(c *clustertest.Procs, tag string) *commitFlow {
	f := &commitFlow{stop: make(chan struct{}), done: make(chan struct{})}
	cl := c.Client(client.Config{})
	go func() {
		defer close(f.done)
		defer cl.Close()
		for i := 0; ; i++ {
			select {
			case <-f.stop:
				return
			default:
			}
			name := fmt.Sprintf("%s-%06d", tag, i)
			if _, err := clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(context.Background(), 1, name, 0); err != nil {
				f.mu.Lock()
				f.err = err // unknown outcome: not counted as acknowledged
				f.mu.Unlock()
				return
			}
			f.mu.Lock()
			f.acked = append(f.acked, name)
			f.mu.Unlock()
		}
	}()
	return f
}

// waitMore waits until n more commits than now are acknowledged.
func (f *commitFlow) waitMore(t *testing.T, n int) {
	t.Helper()
	f.mu.Lock()
	want := len(f.acked) + n
	f.mu.Unlock()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		f.mu.Lock()
		got, err := len(f.acked), f.err
		f.mu.Unlock()
		if got >= want {
			return
		}
		if err != nil {
			t.Fatalf("commits stopped after %d acknowledged (waiting for %d): %v", got, want, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d commits acknowledged after 3 minutes, waiting for %d", got, want)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
}

// end stops the flow (or waits for it to end on an error) and returns
// the names acknowledged.
func (f *commitFlow) end() []string {
	close(f.stop)
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acked
}

// waitInPostgres waits until the database at url holds every name under
// the root: the checkpoint caught up with the commit log.
func waitInPostgres(t *testing.T, url string, names []string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM names WHERE parent = 1 AND name = ANY($1)`, names).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(names) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL holds %d of the %d acknowledged names after 3 minutes", n, len(names))
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// dbName is the database a URL names.
func dbName(t *testing.T, dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

// TestPostgresRestartDuringCommits: a namenode on PostgreSQL keeps
// acknowledging commits from its commit log while PostgreSQL is stopped
// (or its connection cut),
// catches PostgreSQL up once it is back, and after a kill -9 in the middle
// of commits, nothing acknowledged is lost (in the namespace, and in
// PostgreSQL once the restarted namenode replayed its log).
func TestPostgresRestartDuringCommits(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.CreateDB(t)
	log := filepath.Join(t.TempDir(), "nn.log")
	c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-db", url, "-log", log}})
	flow := startCommitFlow(c, "a")
	flow.waitMore(t, 20)
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	flow.waitMore(t, 100) // acknowledged with PostgreSQL down
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	flow.waitMore(t, 20)
	// The namenode's connection cut (as by a proxy or an operator).
	if err := pg.Exec("postgres", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '`+dbName(t, url)+`'`); err != nil {
		t.Fatal(err)
	}
	flow.waitMore(t, 20)
	acked := flow.end()
	waitInPostgres(t, url, acked)
	if !c.NN.Running() {
		t.Fatalf("the namenode stopped:\n%s", c.ReadLog(c.NN))
	}

	// kill -9 while commits flow, PostgreSQL up.
	flow = startCommitFlow(c, "b")
	flow.waitMore(t, 50)
	c.Kill(c.NN)
	acked = append(acked, flow.end()...)
	c.StartNamenode()
	c.WaitLive(2)
	testkit.CheckPresent(t, c, acked)
	waitInPostgres(t, url, acked)
}
