package metrics

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// reqIDInError finds the request id a client's error names.
var reqIDInError = regexp.MustCompile(`\(request ([0-9a-f]{16})\)`)

// waitLogRecord polls p's JSON log for a record with message msg and
// request id req, and returns it.
func waitLogRecord(t *testing.T, c *clustertest.Procs, p *clustertest.Proc, msg, req string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		for _, l := range strings.Split(c.ReadLog(p), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == msg && rec["req"] == req {
				return rec
			}
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not timing a test
	}
	t.Fatalf("no %q record with req %s in %s:\n%s", msg, req, p.Log, c.ReadLog(p))
	return nil
}

// TestRequestIDFollowsFailure (issue 25 item 3): a refused commit and a
// damaged block read each name a request id in the client's error, and
// the namenode's (and the datanode's) JSON log names the same id for it.
func TestRequestIDFollowsFailure(t *testing.T) {
	jsonLogs := []string{"-log-format", "json", "-log-level", "info"}
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, NamenodeArgs: jsonLogs, DatanodeArgs: jsonLogs})

	// A put into a directory alice may not write: refused at its commit.
	c.MustRun("mkdir", "/locked")
	alice := []string{"PLASMAFS_CREDENTIAL=" + c.IssueCredential("alice", auth.RoleUser)}
	out, code := c.RunEnv(alice, []byte("x"), "put", "-stdin", "/locked/f")
	m := reqIDInError.FindStringSubmatch(out)
	if code == 0 || !strings.Contains(out, "permission denied") || m == nil {
		t.Fatalf("put by alice into /locked: exit %d %q, want permission denied naming a request id", code, out)
	}
	rec := waitLogRecord(t, c, c.NN, "request refused", m[1])
	if rec["level"] != "WARN" || rec["user"] != "alice" || rec["code"] != "perm" || rec["op"] != "create" {
		t.Fatalf("namenode's record of the refusal: %v", rec)
	}
	t.Logf("client: %s\nnamenode: %v", out, rec)

	// A block damaged on its only replica: the read fails, the datanode
	// logs the checksum failure under the reader's request id.
	bs := int(c.Opts.Blocksize)
	setup := c.Client(client.Config{})
	testkit.WriteFile(t, setup, "/damaged", testkit.RandomBytes(t, 2*bs), 1)
	ctx := context.Background()
	tx := setup.Begin()
	fi, err := tx.Lookup(ctx, "/damaged")
	if err != nil {
		t.Fatal(err)
	}
	xs, err := tx.Blocks(ctx, fi.Ino)
	tx.Abort(ctx)
	setup.Close()
	if err != nil {
		t.Fatal(err)
	}
	df, err := os.OpenFile(filepath.Join(c.DNs[0].Dir, "data"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(xs[0].Replicas[0].Start)*int64(bs) + 100
	b := make([]byte, 1)
	df.ReadAt(b, off)
	b[0] ^= 0xff
	df.WriteAt(b, off)
	df.Close()
	out, code = c.Run(nil, "cat", "/damaged")
	m = reqIDInError.FindStringSubmatch(out)
	if code == 0 || m == nil {
		t.Fatalf("cat of a damaged block: exit %d, want an error naming a request id: %.300q", code, out)
	}
	rec = waitLogRecord(t, c, c.DNs[0], "data request refused", m[1])
	if rec["level"] != "WARN" || rec["op"] != "read" || !strings.Contains(rec["err"].(string), "checksum") {
		t.Fatalf("datanode's record of the damaged read: %v", rec)
	}
}
