package core

import (
	"testing"

	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestCommitLogRestartsSurviveKill: with a small commit log, the log is
// checkpointed into the database and started over many times while
// clients commit; kill -9 of the namenode in the middle of that loses
// nothing acknowledged, durable or async (process crash: the page cache
// survives), and a restart replays what the database lacks.
func TestCommitLogRestartsSurviveKill(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-log-size", "64K"}})
	acked := testkit.CommitMany(t, c, "r1", 3, 150, clientx.Durable)
	acked = append(acked, testkit.CommitMany(t, c, "r2", 3, 150, clientx.Async)...)
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(2)
	testkit.CheckPresent(t, c, acked)
	// And once more after the replay, with the log started over.
	acked = append(acked, testkit.CommitMany(t, c, "r3", 2, 100, clientx.Durable)...)
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(2)
	testkit.CheckPresent(t, c, acked)
}

// TestCommitLogRestartsSurvivePowerCut: the same across a power cut,
// where only fsynced data survives: every durable commit is there.
func TestCommitLogRestartsSurvivePowerCut(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: []string{"-log-size", "64K"}})
	acked := testkit.CommitMany(t, c.Procs, "r4", 3, 150, clientx.Durable)
	c.PowerCut()
	testkit.CheckPresent(t, c.Procs, acked)
	acked = append(acked, testkit.CommitMany(t, c.Procs, "r5", 2, 100, clientx.Durable)...)
	c.PowerCut()
	testkit.CheckPresent(t, c.Procs, acked)
}
