package mr

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMRTaskLogDirIsNotRootsReader: a task runs as an unprivileged
// account, but when it ends the task server (root) copies the files of
// its PLASMAMR_LOCAL_LOG_DIR into the job's log directory, which the
// submitter reads. A task that replaces that directory, or the whole
// local directory it owns, with a link to a directory of root's (here
// one holding a root-owned 0600 key file, as the task server's own
// credential is) must not get root's files copied for it, nor a file
// that is only a hard link to one.
func TestMRTaskLogDirIsNotRootsReader(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	_, addr := startTaskServer(t, c, c.DNs[0])
	alice := []string{"PLASMAFS_CREDENTIAL=" + c.IssueCredential("alice", auth.RoleUser)}

	// root's key: in a directory every account may search, the file
	// root's alone.
	const secret = "root's key 0xfeedface"
	keyDir := testkit.OpenDir(t)
	key := filepath.Join(keyDir, "host-key.pem")
	if err := os.WriteFile(key, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	c.MustRun("mkdir", "/alice")
	c.MustRun("chown", "alice", "/alice")
	for _, args := range [][]string{{"mkdir", "/alice/in"}, {"put", "-q", "-stdin", "/alice/in/words"}} {
		if out, code := c.RunEnv(alice, []byte("a b c\n"), args...); code != 0 {
			t.Fatalf("alice's %s: exit %d:\n%s", args[0], code, out)
		}
	}
	for i, attack := range []string{
		// The log directory becomes a link to root's directory.
		fmt.Sprintf(`rm -rf "$PLASMAMR_LOCAL_LOG_DIR" && ln -s %s "$PLASMAMR_LOCAL_LOG_DIR"`, keyDir),
		// The local directory (the task's own) moves away; in its place a
		// directory whose log is the link.
		fmt.Sprintf(`cd / && mv "$PLASMAMR_LOCAL_DIR" "$PLASMAMR_LOCAL_DIR.moved" && mkdir "$PLASMAMR_LOCAL_DIR" && ln -s %s "$PLASMAMR_LOCAL_LOG_DIR"`, keyDir),
		// A hard link to root's file (refused by the kernel where
		// fs.protected_hardlinks is 1, which is why the task tries a
		// symbolic link to the file too).
		fmt.Sprintf(`ln %s "$PLASMAMR_LOCAL_LOG_DIR/hard" 2>/dev/null; ln -s %s "$PLASMAMR_LOCAL_LOG_DIR/soft"`, key, key),
	} {
		mapper := fmt.Sprintf(`cat >/dev/null; %s; printf 'done\t1\n'`, attack)
		out, code := c.RunEnv(alice, nil, "mr", "run", "-input", "/alice/in", "-output", fmt.Sprintf("/alice/out%d", i),
			"-work", "/alice/work", "-log", "/alice/log", "-partitions", "1", "-max-attempts", "1", "-taskserver", addr, "-map", mapper)
		id := mrJobID.FindStringSubmatch(out)
		if id == nil {
			t.Fatalf("attack %d: exit %d, no job id in:\n%s", i, code, out)
		}
		logs, lcode := c.RunEnv(alice, nil, "ls", "/alice/log/"+id[1])
		if lcode != 0 {
			t.Fatalf("ls of the job's log directory: exit %d:\n%s", lcode, logs)
		}
		t.Logf("attack %d (job exit %d): log directory:\n%s", i, code, logs)
		for _, name := range strings.Fields(logs) {
			if !strings.HasPrefix(name, "map-") {
				continue
			}
			data, _ := c.RunEnv(alice, nil, "cat", "/alice/log/"+id[1]+"/"+name)
			if strings.Contains(data, secret) {
				t.Errorf("attack %d: root's 0600 key file reached alice's log directory as %s", i, name)
			}
		}
	}
}
