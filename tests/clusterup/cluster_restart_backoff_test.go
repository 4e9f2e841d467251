package clusterup

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/plasmafs/plasma/tests/testkit"
)

// TestClusterRestartDelayStartsOver (issue 19 item 10): the supervisor's
// restart delay grows while a member keeps dying soon after its start, and
// starts over at the minimum once the member has run for the
// -restart-reset time (default 10s) before it dies. (The policy itself,
// with its parameters, is unit-tested with a clock of its own in
// internal/cli; this checks that the supervisor applies it.)
func TestClusterRestartDelayStartsOver(t *testing.T) {
	const reset = 10 * time.Second // the default
	lc := newLocalCluster(t)
	lc.mustRun(lc.upArgs("-detach", "-datanodes", "1", "-taskserver-slots", "0")...)
	delayOf := func(pid int) string {
		t.Helper()
		re := regexp.MustCompile(`dn1 \(pid ` + strconv.Itoa(pid) + `\) died after [^;]*; restarting in ([0-9.a-zµ]+)`)
		var delay string
		testkit.AwaitCond(t, 60*time.Second, "cluster.log reports the death of dn1 pid "+strconv.Itoa(pid), func() bool {
			b, _ := os.ReadFile(filepath.Join(lc.dir, "cluster.log"))
			m := re.FindSubmatch(b)
			if m != nil {
				delay = string(m[1])
			}
			return m != nil
		})
		return delay
	}
	// Quick deaths: each kill as soon as the restarted datanode runs.
	pid := lc.members()["dn1"]
	var delays []string
	for range 4 {
		lc.killMember(map[string]int{"dn1": pid}, "dn1")
		delays = append(delays, delayOf(pid))
		pid = lc.restarted("dn1", pid)
	}
	if delays[0] != "250ms" || delays[len(delays)-1] == "250ms" {
		t.Fatalf("restart delays after quick deaths %v: want 250ms first, growing", delays)
	}
	// A run longer than the reset time: the delay starts over.
	seen := time.Now() // the datanode runs since before this
	testkit.AwaitCond(t, time.Minute, "time passed", func() bool { return time.Since(seen) > reset })
	lc.killMember(map[string]int{"dn1": pid}, "dn1")
	if d := delayOf(pid); d != "250ms" {
		t.Fatalf("restart delay after a run of more than %v: %s, want 250ms (delays before: %v)", reset, d, delays)
	}
	lc.restarted("dn1", pid)
}
