package replication

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestScrubProgressShown: 'plasma admin datanodes' and 'plasma fsck' show
// each datanode's scrubber progress: once a full pass ended, its time
// and the written blocks it verified (every replica the datanode holds).
func TestScrubProgressShown(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Size: 8 << 20, DatanodeArgs: []string{"-scrub-interval", "1s", "-scrub-rate", "1073741824"}})
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{"/s": testkit.RandomBytes(t, 300<<10)}
	testkit.WriteFile(t, cl, "/s", files["/s"], 2)
	awaitReplicas(t, c, cl, files, 2, nil, 60*time.Second)
	blocks := uint64((300<<10 + c.Opts.Blocksize - 1) / c.Opts.Blocksize)
	for deadline := time.Now().Add(60 * time.Second); ; {
		done := 0
		lines := strings.Split(strings.TrimSpace(c.MustRun("admin", "datanodes", "-json")), "\n")
		for _, line := range lines {
			var row struct {
				LastPass string `json:"scrub_last_pass"`
				Verified uint64 `json:"scrub_blocks_verified"`
			}
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				t.Fatalf("admin datanodes -json: %v: %s", err, line)
			}
			if row.LastPass != "" && row.Verified >= blocks {
				if _, err := time.Parse(time.RFC3339, row.LastPass); err != nil {
					t.Fatalf("scrub_last_pass %q: %v", row.LastPass, err)
				}
				done++
			}
		}
		if done == len(lines) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no full scrub pass of %d blocks on every datanode after 60s:\n%s", blocks, c.MustRun("admin", "datanodes", "-json"))
		}
		time.Sleep(100 * time.Millisecond) // polling a condition, not timing the test
	}
	if out := c.MustRun("admin", "datanodes"); strings.Count(out, "blocks verified") != 2 {
		t.Errorf("admin datanodes does not show both scrubbers' last pass:\n%s", out)
	}
	if out := c.MustRun("fsck"); strings.Count(out, "full pass") != 2 || !strings.Contains(out, "blocks verified") {
		t.Errorf("fsck does not show both scrubbers' last pass:\n%s", out)
	}
}
