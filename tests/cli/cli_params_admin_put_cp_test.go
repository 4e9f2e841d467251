package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientconf"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestParamsShowsEffectiveSettings: 'plasma params' lists the values this
// client really uses: the namenode it reached, the cluster name the
// namenode reports, the credential and its user, the security levels,
// the block size, the namenode's default replication and both datanodes;
// -json gives the same fields. The configuration file case names the file.
func TestParamsShowsEffectiveSettings(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 128 << 10, Cluster: "paramtest"})
	out := c.MustRun("params", "-json")
	var p map[string]any
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("params -json: %v\n%s", err, out)
	}
	want := map[string]any{
		"namenode_cluster": "paramtest", "config_source": "$PLASMAFS_NAMENODES", "namenode": c.NN.Addr,
		"user": "admin", "credential": c.AdminCred, "security": "privacy", "namenode_security": "privacy",
		"data_security": "auth", "blocksize": 128 << 10, "replication": 1, "datanodes": 2, "live_datanodes": 2,
		"namenodes": []any{c.NN.Addr},
	}
	for k, v := range want {
		if fmt.Sprint(p[k]) != fmt.Sprint(v) {
			t.Errorf("params %s = %v, want %v\n%s", k, p[k], v, out)
		}
	}
	text := c.MustRun("params")
	for _, s := range []string{"paramtest", c.NN.Addr, c.AdminCred, "131072", "2 (2 alive)"} {
		if !strings.Contains(text, s) {
			t.Errorf("params text lacks %q:\n%s", s, text)
		}
	}

	// From a configuration file: the file is named, and its cluster.
	cfgFile := filepath.Join(t.TempDir(), "plasmafs.conf")
	entry := clientconf.Cluster{Name: "paramtest", Namenodes: []string{c.NN.Addr}, Security: "privacy", DataSecurity: "auth", Credential: c.AdminCred, TaskServers: []string{"127.0.0.1:1"}}
	if err := os.WriteFile(cfgFile, []byte(clientconf.Format([]clientconf.Cluster{entry})), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := c.RunEnv([]string{"PLASMAFS_NAMENODES=", "PLASMAFS_CONFIG=" + cfgFile, "PLASMAFS_SECURITY=", "PLASMAFS_DATA_SECURITY=", "PLASMAFS_CREDENTIAL="}, nil, "params")
	if code != 0 {
		t.Fatalf("params from a file: exit %d\n%s", code, out)
	}
	for _, s := range []string{cfgFile, "paramtest", c.NN.Addr, "127.0.0.1:1"} {
		if !strings.Contains(out, s) {
			t.Errorf("params from %s lacks %q:\n%s", cfgFile, s, out)
		}
	}
}

// TestAdminTableListsDatanodes: 'plasma admin_table' (also spelled
// admin-table) lists both datanodes with their address, state, capacity,
// used bytes and liveness; a stopped datanode shows as dead; -put is
// refused (read-only).
func TestAdminTableListsDatanodes(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	bs := int(c.Opts.Blocksize)
	if out, code := c.Run(testkit.RandomBytes(t, 3*bs), "put", "-rep", "2", "-stdin", "/f"); code != 0 {
		t.Fatal(out)
	}
	type row struct {
		ID       int    `json:"id"`
		Identity string `json:"identity"`
		Addr     string `json:"addr"`
		State    string `json:"state"`
		Capacity int64  `json:"capacity"`
		Used     int64  `json:"used"`
		Alive    bool   `json:"alive"`
	}
	rows := func() map[string]row {
		out := c.MustRun("admin_table", "-json", "datanodes")
		m := map[string]row{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var r row
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("admin_table -json: %v\n%s", err, out)
			}
			m[r.Addr] = r
		}
		return m
	}
	m := rows()
	if len(m) != 2 {
		t.Fatalf("admin_table lists %d datanodes, want 2: %+v", len(m), m)
	}
	for _, p := range c.DNs {
		r, ok := m[p.Addr]
		if !ok {
			t.Fatalf("datanode %s missing from admin_table: %+v", p.Addr, m)
		}
		if r.State != "alive" || !r.Alive || r.Capacity != c.Opts.Size || r.Used != int64(3*bs) || r.Identity == "" {
			t.Errorf("datanode %s: %+v, want alive, capacity %d, used %d", p.Addr, r, c.Opts.Size, 3*bs)
		}
	}
	text := c.MustRun("admin-table")
	for _, p := range c.DNs {
		if !strings.Contains(text, p.Addr) || !strings.Contains(text, "alive") {
			t.Errorf("admin-table text lacks %s alive:\n%s", p.Addr, text)
		}
	}
	if !strings.Contains(text, "CAPACITY") || !strings.Contains(text, strconv.FormatInt(c.Opts.Size, 10)) {
		t.Errorf("admin-table text lacks the capacity column:\n%s", text)
	}
	if out, code := c.Run(nil, "admin_table", "-put", "datanodes"); code != 1 || !strings.Contains(out, "read-only") {
		t.Errorf("admin_table -put: exit %d, want 1 saying read-only:\n%s", code, out)
	}

	c.Stop(c.DNs[1])
	for deadline := time.Now().Add(60 * time.Second); ; {
		r := rows()[c.DNs[1].Addr]
		if r.State == "dead" && !r.Alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stopped datanode %s still shown as %+v after 60s", c.DNs[1].Addr, r)
		}
		time.Sleep(50 * time.Millisecond) // polling for the namenode to notice
	}
}

// TestPutStarWritesEveryReplica: 'put -star' sends each block to every
// replica itself: the datanodes together write the file once per replica
// (each its own copy) and forward nothing, where 'put -chain' makes the
// first replica forward it too (three times the size written by the
// datanodes instead of two). Both files read back byte for byte and fsck
// finds every replica of each intact.
func TestPutStarWritesEveryReplica(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Size: 1 << 30})
	bs := int(c.Opts.Blocksize)
	size := 96 * bs // one run of blocks: one first replica
	noSC := []string{"PLASMAFS_NO_SHORTCIRCUIT=1"}
	pids := []int{testkit.DatanodePid(t, c.DNs[0]), testkit.DatanodePid(t, c.DNs[1])}
	written := func() int64 {
		var n int64
		for _, pid := range pids {
			n += testkit.ProcWriteChars(t, pid)
		}
		return n
	}
	for _, mode := range []string{"-star", "-chain"} {
		data := testkit.RandomBytes(t, size)
		before := written()
		if out, code := c.RunEnv(noSC, data, "put", "-q", "-rep", "2", mode, "-stdin", "/f"+mode); code != 0 {
			t.Fatalf("put %s: exit %d\n%s", mode, code, out)
		}
		n := written() - before
		t.Logf("put %s: datanodes wrote %d bytes for a file of %d", mode, n, size)
		switch {
		case mode == "-star" && (n < int64(2*size) || n >= int64(5*size/2)):
			t.Errorf("put -star: datanodes wrote %d bytes, want about %d (two copies, nothing forwarded)", n, 2*size)
		case mode == "-chain" && n < int64(5*size/2):
			t.Errorf("put -chain: datanodes wrote %d bytes, want about %d (two copies and one forward)", n, 3*size)
		}
		out, code := c.RunEnv(noSC, nil, "cat", "/f"+mode)
		if code != 0 || !bytes.Equal([]byte(out), data) {
			t.Fatalf("cat /f%s: exit %d, %d bytes, want the %d put", mode, code, len(out), size)
		}
	}
	cl := c.Client(client.Config{})
	defer cl.Close()
	rep, err := cl.Fsck(context.Background())
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("fsck: %v %v", err, rep.Problems)
	}
	if rep.Blocks < 2*96 {
		t.Fatalf("fsck checked %d blocks, want at least %d", rep.Blocks, 2*96)
	}
	for _, mode := range []string{"-star", "-chain"} {
		tx := cl.Begin()
		fi, err := tx.Lookup(context.Background(), "/f"+mode)
		if err != nil {
			t.Fatal(err)
		}
		xs, err := tx.Blocks(context.Background(), fi.Ino)
		tx.Abort(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range xs {
			if len(x.Replicas) != 2 {
				t.Fatalf("/f%s blocks %d+%d have %d replicas, want 2", mode, x.Index, x.Count, len(x.Replicas))
			}
		}
	}
	if out, code := c.Run(nil, "put", "-star", "-chain"); code != 2 {
		t.Fatalf("put without a file: exit %d, want 2\n%s", code, out)
	}
}

// TestCpTreePrefixesRoundTrip: cp takes the original's tree prefixes:
// file::/local into plasma::/x, back out to a new local file, into a
// PlasmaFS path without a prefix, local to local, all byte for byte; a
// PlasmaFS name holding "::" after a slash is an ordinary path, an unknown
// prefix a usage error.
func TestCpTreePrefixesRoundTrip(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	dir := t.TempDir()
	data := testkit.RandomBytes(t, 5*int(c.Opts.Blocksize)+123)
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c.MustRun("cp", "file::"+src, "plasma::/x")
	if out := c.MustRun("cat", "/x"); out != string(data) {
		t.Fatalf("/x after cp file::%s plasma::/x: %d bytes, want %d", src, len(out), len(data))
	}
	c.MustRun("cp", "plasma::/x", "file::"+filepath.Join(dir, "back"))
	c.MustRun("cp", "/x", "/a::b")
	c.MustRun("cp", "/a::b", "file::"+filepath.Join(dir, "back2"))
	c.MustRun("cp", "file::"+filepath.Join(dir, "back2"), "file::"+filepath.Join(dir, "back3"))
	for _, name := range []string{"back", "back2", "back3"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes (%v), want the %d copied in", name, len(got), err, len(data))
		}
	}
	// Into existing directories, both ways, as cp(1) does.
	c.MustRun("mkdir", "/into")
	c.MustRun("cp", "file::"+src, "/into")
	if out := c.MustRun("cat", "/into/src"); out != string(data) {
		t.Fatalf("/into/src after cp file::%s /into: %d bytes, want %d", src, len(out), len(data))
	}
	local := filepath.Join(dir, "into")
	if err := os.Mkdir(local, 0o755); err != nil {
		t.Fatal(err)
	}
	c.MustRun("cp", "/x", "file::"+local)
	if got, err := os.ReadFile(filepath.Join(local, "x")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("cp /x file::%s: %s/x has %d bytes (%v), want %d", local, local, len(got), err, len(data))
	}
	if out, code := c.Run(nil, "cp", "ssh::/x", "/y"); code != 2 || !strings.Contains(out, "unknown tree") {
		t.Fatalf("cp ssh::/x: exit %d, want 2 naming the unknown tree\n%s", code, out)
	}
	if out, code := c.Run(nil, "cp", "file::"+filepath.Join(dir, "missing"), "/y"); code != 1 || !strings.Contains(out, "missing") {
		t.Fatalf("cp of a missing local file: exit %d, want 1 naming it\n%s", code, out)
	}
}
