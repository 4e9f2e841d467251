package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// runPlasma runs the plasma binary with env added to a cleaned environment
// (no PLASMAFS_ variables, HOME in a temporary directory) and returns its
// stdout, stderr and exit code. A command still running after limit is
// killed (exit code -1).
func runPlasma(t *testing.T, env []string, limit time.Duration, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, clustertest.Binary(t), args...)
	cmd.Env = append(cleanEnv(t), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("plasma %q: %v", args, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

var (
	cleanHomeOnce sync.Once
	cleanHome     string
)

// cleanEnv is the environment without PLASMAFS_ settings and with HOME and
// PLASMAFS_CONFIG in a directory of its own, so no command finds the
// developer's cluster.
func cleanEnv(t *testing.T) []string {
	cleanHomeOnce.Do(func() {
		d, err := os.MkdirTemp("", "plasma-home-")
		if err != nil {
			t.Fatal(err)
		}
		cleanHome = d
	})
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PLASMAFS_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+cleanHome, "PLASMAFS_CONFIG="+filepath.Join(cleanHome, "plasmafs"))
}

// TestFlagErrors (issue 8 item 12): sizes, counts and durations are
// range-checked, an overflowing size is refused rather than wrapped, and a
// flag error is one line plus the usage line with exit status 2 (-help is
// the whole help on stdout, exit 0).
func TestFlagErrors(t *testing.T) {
	tmp := t.TempDir()
	local := filepath.Join(tmp, "local")
	os.WriteFile(local, []byte("x"), 0o644)
	vol := filepath.Join(tmp, "vol")
	env := []string{"PLASMAFS_NAMENODES=127.0.0.1:1", "PLASMAFS_SECURITY=none", "PLASMAFS_DATA_SECURITY=none"}
	nn := func(extra ...string) []string {
		return append([]string{"namenode", "-listen", "127.0.0.1:0", "-security", "none", "-db", filepath.Join(tmp, "nn.db")}, extra...)
	}
	cases := []struct {
		args []string
		want string // in the error line
	}{
		{[]string{"datanode", "init", "-dir", vol, "-size", "99999999999T"}, "too large"},
		{[]string{"datanode", "init", "-dir", vol, "-size", "-4G"}, "negative"},
		{[]string{"datanode", "init", "-dir", vol, "-blocksize", "1T"}, "-blocksize"},
		{[]string{"cluster", "up", "-dir", filepath.Join(tmp, "cluster"), "-size", "99999999999T"}, "too large"},
		{[]string{"cluster", "up", "-dir", filepath.Join(tmp, "cluster"), "-datanodes", "0"}, "-datanodes"},
		{nn("-txn-timeout", "-5s"), "-txn-timeout"},
		{nn("-heartbeat-timeout", "-1s"), "-heartbeat-timeout"},
		{nn("-ticket-lifetime", "48h"), "-ticket-lifetime"},
		{nn("-sync-commits", "-1"), "-sync-commits"},
		{nn("-rep", "300"), "-rep"},
		{[]string{"datanode", "-dir", vol, "-namenode", "127.0.0.1:1", "-heartbeat", "-1s"}, "-heartbeat"},
		{[]string{"put", "-rep", "-1", local, "/x"}, "-rep"},
		{[]string{"put", "-rep", "257", local, "/x"}, "-rep"},
		{[]string{"put", "-commit-every", "-5", local, "/x"}, "-commit-every"},
		{[]string{"create", "-rep", "17", "/x"}, "-rep"},
		{[]string{"ls", "-bogus", "/"}, "-bogus"},
		{[]string{"cluster"}, "missing subcommand"},
		{[]string{"kv"}, "missing subcommand"},
	}
	type result struct {
		stdout, stderr string
		code           int
	}
	results := make([]result, len(cases))
	var wg sync.WaitGroup
	for i, tc := range cases {
		wg.Go(func() {
			o, e, code := runPlasma(t, env, 20*time.Second, tc.args...)
			results[i] = result{o, e, code}
		})
	}
	wg.Wait()
	for i, tc := range cases {
		r := results[i]
		if r.code != 2 {
			t.Errorf("plasma %q: exit %d, want 2 (usage error); stdout %q, stderr %q", tc.args, r.code, r.stdout, r.stderr)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		cmd := tc.args[0]
		if cmd == "datanode" && tc.args[1] == "init" || cmd == "cluster" && len(tc.args) > 1 {
			cmd += " " + tc.args[1]
		}
		switch {
		case len(tc.args) == 1 && (cmd == "cluster" || cmd == "kv"):
			// A group without its subcommand: the error, then the list.
			if !strings.HasPrefix(lines[0], "plasma "+cmd+": "+tc.want) || !strings.Contains(r.stderr, "\n  create ") && !strings.Contains(r.stderr, "\n  up ") {
				t.Errorf("plasma %q: stderr %q, want the error and the subcommands", tc.args, r.stderr)
			}
		case len(lines) != 2 || !strings.HasPrefix(lines[0], "plasma "+cmd+": ") || !strings.Contains(lines[0], tc.want) ||
			!strings.HasPrefix(lines[1], "usage: plasma "+cmd+" "):
			t.Errorf("plasma %q: stderr is not the error (mentioning %q) and the usage line:\n%s", tc.args, tc.want, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("plasma %q: stdout %q", tc.args, r.stdout)
		}
	}
	// Nothing was created by the refused commands.
	for _, p := range []string{vol, filepath.Join(tmp, "cluster")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists after a refused command", p)
		}
	}
	// A volume larger than the free space is refused before anything is
	// written (with -fallocate, so the code before the check could not
	// fill the disk either).
	if o, e, code := runPlasma(t, env, 20*time.Second, "datanode", "init", "-fallocate", "-dir", vol, "-size", "1P"); code != 1 || !strings.Contains(e, "does not fit") {
		t.Errorf("datanode init -size 1P: exit %d, stdout %q, stderr %q", code, o, e)
	}
	if _, err := os.Stat(filepath.Join(vol, "data")); err == nil {
		t.Errorf("datanode init -size 1P left a data file")
	}
	// -help: everything, on stdout, exit 0.
	o, e, code := runPlasma(t, env, 20*time.Second, "put", "-help")
	if code != 0 || !strings.Contains(o, "usage: plasma put") || !strings.Contains(o, "-commit-every") || e != "" {
		t.Errorf("put -help: exit %d, stdout %q, stderr %q", code, o, e)
	}
	// Groups list their subcommands, whichever way help is asked for.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "--help"}, "  up "},
		{[]string{"kv", "-h"}, "  lookup "},
		{[]string{"help", "mr"}, "  taskserver "},
		{[]string{"bench", "-help"}, "  metarates "},
		{[]string{"admin", "--help"}, "  user add NAME "},
	} {
		o, e, code := runPlasma(t, env, 20*time.Second, tc.args...)
		if code != 0 || !strings.Contains(o, tc.want) || e != "" {
			t.Errorf("plasma %q: exit %d, stdout %q, stderr %q", tc.args, code, o, e)
		}
	}
}

// weirdNames are file names that must not reach a terminal as they are,
// with how plasma prints them.
var weirdNames = []struct{ name, shown string }{
	{"new\nline", `new\nline`},
	{"esc\x1b[31mred", `esc\x1b[31mred`},
	{"bad\xff\xfe", `bad\xff\xfe`},
	{"tab\tname", `tab\tname`},
	{`back\slash`, `back\\slash`},
	{"csi\u009bx", `csi\u009bx`},
	{"plain", "plain"},
}

// checkTerminalSafe fails if out contains a control character other than
// the newline, or bytes that are not UTF-8.
func checkTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: output is not valid UTF-8: %q", what, out)
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			t.Errorf("%s: output contains control character %U: %q", what, r, out)
			return
		}
	}
}

// TestEscapedNames (issue 8 item 13): names with newlines, control
// characters and invalid UTF-8 are printed escaped by ls, ls -l, stat,
// blocks, fsck and in errors, one entry per line; ls -json and stat -json
// keep the exact bytes.
func TestEscapedNames(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	c.MustRun("mkdir", "/d")
	for _, n := range weirdNames {
		if out, code := c.Run([]byte("data of "+n.name), "put", "-q", "-rep", "1", "-stdin", "/d/"+n.name); code != 0 {
			t.Fatalf("put %q: %s", n.name, out)
		}
	}
	link, target := "link\x07", "tgt\x1b]0;title\x07"
	c.MustRun("ln", "-s", target, "/d/"+link)

	// ls: one line per entry, each the escaped name.
	out := c.MustRun("ls", "/d")
	checkTerminalSafe(t, "ls", out)
	var want []string
	for _, n := range weirdNames {
		want = append(want, n.shown)
	}
	want = append(want, `link\x07`)
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ls /d printed\n%q\nwant the lines\n%q", got, want)
	}

	out = c.MustRun("ls", "-l", "/d")
	checkTerminalSafe(t, "ls -l", out)
	if n := strings.Count(out, "\n"); n != len(weirdNames)+1 {
		t.Errorf("ls -l /d: %d lines for %d entries:\n%s", n, len(weirdNames)+1, out)
	}
	if !strings.Contains(out, `link\x07 -> tgt\x1b]0;title\x07`) {
		t.Errorf("ls -l: symlink not shown escaped:\n%s", out)
	}

	// ls -json: the exact names.
	out = c.MustRun("ls", "-json", "/d")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(weirdNames)+1 {
		t.Fatalf("ls -json: %d lines for %d entries:\n%s", len(lines), len(weirdNames)+1, out)
	}
	type entry struct {
		Path, Name, Type, Target string
		PathB64                  []byte `json:"path_base64"`
		NameB64                  []byte `json:"name_base64"`
		TargetB64                []byte `json:"target_base64"`
		Size                     int64
		Ino                      uint64
	}
	exact := func(s string, b []byte) string {
		if b != nil {
			return string(b)
		}
		return s
	}
	names := map[string]entry{}
	for _, l := range lines {
		var e entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("ls -json line %q: %v", l, err)
		}
		names[exact(e.Name, e.NameB64)] = e
		if p := exact(e.Path, e.PathB64); p != "/d/"+exact(e.Name, e.NameB64) {
			t.Errorf("ls -json: path %q for name %q", p, exact(e.Name, e.NameB64))
		}
	}
	for _, n := range weirdNames {
		e, ok := names[n.name]
		if !ok {
			t.Errorf("ls -json: no entry with the exact name %q", n.name)
			continue
		}
		if e.Type != "file" || e.Size != int64(len("data of "+n.name)) {
			t.Errorf("ls -json %q: %+v", n.name, e)
		}
	}
	if e := names[link]; exact(e.Target, e.TargetB64) != target {
		t.Errorf("ls -json: symlink target %q, want %q", exact(e.Target, e.TargetB64), target)
	}

	// stat, blocks, errors.
	for _, n := range weirdNames {
		out := c.MustRun("stat", "/d/"+n.name)
		checkTerminalSafe(t, "stat", out)
		if !strings.Contains(out, "  path: /d/"+n.shown+"\n") {
			t.Errorf("stat %q:\n%s", n.name, out)
		}
		out = c.MustRun("stat", "-json", "/d/"+n.name)
		var e entry
		if err := json.Unmarshal([]byte(out), &e); err != nil || exact(e.Path, e.PathB64) != "/d/"+n.name {
			t.Errorf("stat -json %q: %v %q", n.name, err, out)
		}
	}
	out = c.MustRun("blocks", "/d/new\nline", "/d/esc\x1b[31mred", "/d/bad\xff\xfe")
	checkTerminalSafe(t, "blocks", out)
	for _, h := range []string{`/d/new\nline:`, `/d/esc\x1b[31mred:`, `/d/bad\xff\xfe:`} {
		if !strings.Contains(out, "\n"+h+"\n") && !strings.HasPrefix(out, h+"\n") {
			t.Errorf("blocks: no header %q:\n%s", h, out)
		}
	}
	out, code := c.Run(nil, "cat", "/d/nope\x1b[2J\nsecond")
	checkTerminalSafe(t, "cat error", out)
	if code != 1 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `nope\x1b[2J`) {
		t.Errorf("cat of a missing weird name: exit %d, %q", code, out)
	}

	// fsck names the paths, escaped: kill the only datanode (its replicas
	// are not checked: exit status 3, issue 19 item 9).
	c.Kill(c.DNs[0])
	out, code = c.Run(nil, "fsck", "-wait", "0s")
	checkTerminalSafe(t, "fsck", out)
	if code != 3 || !strings.Contains(out, `/d/esc\x1b[31mred`) || !strings.Contains(out, `/d/new\nline`) {
		t.Errorf("fsck with the datanode gone: exit %d:\n%s", code, out)
	}
}

// TestTruncatedVolumeNamed (issue 8 item 14): a datanode whose block-store
// files are shorter than its config says refuses to start with a message
// naming the file and saying it is truncated.
func TestTruncatedVolumeNamed(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	for _, file := range []string{"data", "config"} {
		dir := c.InitVolume(c.Opts.Cluster, c.Opts.Blocksize, 4<<20)
		p := filepath.Join(dir, file)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, st.Size()/3); err != nil {
			t.Fatal(err)
		}
		dn := &clustertest.Proc{Addr: "127.0.0.1:0", Dir: dir, Log: dir + ".log"}
		c.StartDatanode(dn)
		code := c.Wait(dn)
		log := c.ReadLog(dn)
		if code == 0 || !strings.Contains(log, p) || !(strings.Contains(log, "truncated") || file == "config" && strings.Contains(log, "corrupt")) {
			t.Errorf("datanode with %s truncated: exit %d, log %q (want the path %s and what is wrong)", file, code, log, p)
		}
	}
}
