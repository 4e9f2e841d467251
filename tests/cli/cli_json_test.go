package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// jsonLines parses plasma's -json output: one object per line.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q (%v)\nall output:\n%s", sc.Text(), err, out)
		}
		objs = append(objs, m)
	}
	return objs
}

// TestCLIJSON: ls, stat, blocks, fsstat, fsck and admin stats print, with
// -json, objects whose facts agree with each other and with the cluster:
// the file's size and replication, the datanodes holding its blocks, a
// damaged replica in fsck's problems (and its exit status).
func TestCLIJSON(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	bs := int(c.Opts.Blocksize)
	local := filepath.Join(t.TempDir(), "f")
	testkit.MustOK(t, "write", os.WriteFile(local, testkit.SeededBytes(3*bs+5, 9), 0o644))
	c.MustRun("put", "-rep", "2", local, "/f")
	c.MustRun("mkdir", "/d")

	st := jsonLines(t, c.MustRun("stat", "-json", "/f"))
	if len(st) != 1 || st[0]["size"] != float64(3*bs+5) || st[0]["type"] != "file" || st[0]["rep"] != float64(2) {
		t.Fatalf("stat -json: %v", st)
	}
	ls := jsonLines(t, c.MustRun("ls", "-json", "/"))
	names := map[string]map[string]any{}
	for _, e := range ls {
		names[e["name"].(string)] = e
	}
	if names["f"] == nil || names["d"] == nil || names["f"]["ino"] != st[0]["ino"] || names["d"]["type"] != "directory" {
		t.Fatalf("ls -json disagrees with stat -json: %v", ls)
	}

	bl := jsonLines(t, c.MustRun("blocks", "-json", "/f"))
	if len(bl) != 1 || bl[0]["actual_replication"] != float64(2) || bl[0]["requested_replication"] != float64(2) || bl[0]["blocks"] != float64(8) {
		t.Fatalf("blocks -json: %v", bl)
	}
	fsstat := jsonLines(t, c.MustRun("fsstat", "-json"))
	if len(fsstat) != 1 {
		t.Fatalf("fsstat -json: %v", fsstat)
	}
	nodes := fsstat[0]["datanodes"].([]any)
	if len(nodes) != 2 || fsstat[0]["files"] != float64(1) {
		t.Fatalf("fsstat -json: %v", fsstat[0])
	}
	known := map[string]bool{}
	for _, n := range nodes {
		known[n.(map[string]any)["identity"].(string)] = n.(map[string]any)["alive"] == true
	}
	var first map[string]any
	for _, x := range bl[0]["extents"].([]any) {
		for _, r := range x.(map[string]any)["replicas"].([]any) {
			r := r.(map[string]any)
			if !known[r["datanode"].(string)] {
				t.Fatalf("blocks -json names datanode %v, which fsstat -json does not list alive", r["datanode"])
			}
			if first == nil {
				first = r
			}
		}
	}
	if s := jsonLines(t, c.MustRun("admin", "stats", "-json")); len(s) != 1 || s[0]["commits"].(float64) < 2 {
		t.Fatalf("admin stats -json: %v", s)
	}

	fsck := jsonLines(t, c.MustRun("fsck", "-json"))
	if len(fsck) != 1 || len(fsck[0]["problems"].([]any)) != 0 || fsck[0]["files"] != float64(1) {
		t.Fatalf("fsck -json on a clean cluster: %v", fsck)
	}
	// Damage the first replica's first block: fsck -json names it and exits 1.
	var vol string
	for _, p := range c.DNs {
		if p.Addr == first["addr"] {
			vol = p.Dir
		}
	}
	df, err := os.OpenFile(filepath.Join(vol, "data"), os.O_RDWR, 0)
	testkit.MustOK(t, "open block store", err)
	off := int64(first["start"].(float64))*int64(bs) + 7
	b := make([]byte, 1)
	df.ReadAt(b, off)
	b[0] ^= 0xff
	df.WriteAt(b, off)
	df.Close()
	out, code := c.Run(nil, "fsck", "-json")
	if code != 1 {
		t.Fatalf("fsck -json with a damaged replica exited %d:\n%s", code, out)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	fsck = jsonLines(t, strings.Join(lines, "\n"))
	if len(fsck) != 1 || len(fsck[0]["problems"].([]any)) == 0 || !strings.Contains(fsck[0]["problems"].([]any)[0].(string), "/f") {
		t.Fatalf("fsck -json does not name the damaged file: %s", out)
	}
}
