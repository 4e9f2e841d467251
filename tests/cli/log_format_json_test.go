package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestLogFormatJSON (issue 25): with -log-format json the namenode and the
// datanodes log one JSON object a line, with time, level, message and the
// record's attributes as fields.
func TestLogFormatJSON(t *testing.T) {
	jsonLogs := []string{"-log-format", "json", "-log-level", "info"}
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, NamenodeArgs: jsonLogs, DatanodeArgs: jsonLogs})
	for _, p := range []struct {
		proc *clustertest.Proc
		msg  string
	}{{c.NN, "namenode serving"}, {c.DNs[0], "datanode serving"}} {
		// A datanode logs it just after its registration, which the
		// cluster's start waited for: poll its log.
		var line string
		for deadline := time.Now().Add(30 * time.Second); line == "" && time.Now().Before(deadline); {
			for _, l := range strings.Split(c.ReadLog(p.proc), "\n") {
				if strings.Contains(l, p.msg) {
					line = l
				}
			}
			if line == "" {
				time.Sleep(10 * time.Millisecond) // polling a condition, not timing a test
			}
		}
		if line == "" {
			t.Fatalf("no %q record in %s:\n%s", p.msg, p.proc.Log, c.ReadLog(p.proc))
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if rec["msg"] != p.msg || rec["level"] != "INFO" || rec["time"] == nil || rec["addr"] != p.proc.Addr {
			t.Fatalf("log record %v: want msg %q, level INFO, a time and addr %s", rec, p.msg, p.proc.Addr)
		}
	}
}
