package postgres

import (
	"testing"

	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/pgtest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestPostgresPowerCutOfTheNamenodeHost: a power cut of the namenode's
// machine (its commit log and the datanode volumes lose what they did not
// fsync; the PostgreSQL server, another machine, keeps running) loses no
// acknowledged commit, and PostgreSQL catches up with the replayed log.
func TestPostgresPowerCutOfTheNamenodeHost(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.CreateDB(t)
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: []string{"-db", url, "-log-size", "64K"}})
	acked := testkit.CommitMany(t, c.Procs, "p1", 3, 100, clientx.Durable)
	c.PowerCut()
	testkit.CheckPresent(t, c.Procs, acked)
	acked = append(acked, testkit.CommitMany(t, c.Procs, "p2", 2, 100, clientx.Durable)...)
	c.PowerCut()
	testkit.CheckPresent(t, c.Procs, acked)
	waitInPostgres(t, url, acked)
}
