package mr

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/mrexec"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Issue 19 item 6: MapReduce tasks on task servers run with their
// submitter's PlasmaFS identity (a credential the namenode delegates to
// the job) and as an unprivileged OS user; the task-server protocol runs
// inside the cluster's TLS.

// copyPrivate copies file src into dir as a root-owned 0600 file.
func copyPrivate(t *testing.T, src, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// owners returns the owner of every file in dir.
func owners(t *testing.T, c *clustertest.Procs, dir string) map[string]string {
	t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	ents, err := tx.ReadDirPlus(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		m[e.Name] = e.Info.User
	}
	return m
}

// TestMRTaskIdentity: alice, an ordinary user, submits jobs to a task
// server started by root. A map that reads root's 0600 file in PlasmaFS,
// with the superuser credential it finds on the host or inherits, fails
// with a permission error; a streaming task's uid is not 0; a task cannot
// read the task server's own key file (0600, root's); alice's output is
// owned by alice; a plain TCP client gets no HTTP answer from the task
// server.
func TestMRTaskIdentity(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	open := testkit.OpenDir(t)
	tsCred := copyPrivate(t, c.IssueCredential("taskserver", auth.RoleTaskServer), open)
	adminCred := copyPrivate(t, c.AdminCred, open)
	_, addr := startTaskServer(t, c, c.DNs[0], "-credential", tsCred)
	alice := []string{"PLASMAFS_CREDENTIAL=" + c.IssueCredential("alice", auth.RoleUser)}

	const secret = "root's secret 4711"
	testkit.MRPut(t, c, "/private", map[string][]byte{"secret": []byte(secret + "\n")})
	c.MustRun("chmod", "600", "/private/secret")
	c.MustRun("mkdir", "/alice")
	c.MustRun("chown", "alice", "/alice")
	for _, args := range [][]string{{"mkdir", "/alice/in"}, {"put", "-q", "-stdin", "/alice/in/words"}} {
		if out, code := c.RunEnv(alice, []byte("a b c\n"), args...); code != 0 {
			t.Fatalf("alice's %s: exit %d:\n%s", args[0], code, out)
		}
	}
	job := func(out, mapper string) (string, int) {
		return c.RunEnv(alice, nil, "mr", "run", "-input", "/alice/in", "-output", out, "-work", "/alice/work", "-log", "/alice/log",
			"-partitions", "1", "-max-attempts", "1", "-taskserver", addr, "-map", mapper)
	}

	// The map reads root's file with the superuser's credential: one it
	// finds on the host (its file is root's, 0600), one it inherits from
	// the task server's environment.
	nnEnv := fmt.Sprintf("PLASMAFS_CONFIG=/nonexistent PLASMAFS_NAMENODES=%s PLASMAFS_SECURITY=%s PLASMAFS_DATA_SECURITY=%s",
		c.NN.Addr, c.Opts.Security, c.Opts.DataSecurity)
	for i, reader := range []string{
		fmt.Sprintf("%s PLASMAFS_CREDENTIAL=%s %s cat /private/secret", nnEnv, adminCred, c.Bin),
		fmt.Sprintf("%s cat /private/secret", c.Bin),
	} {
		mapper := fmt.Sprintf(`cat >/dev/null; s=$(%s) || exit 3; printf 'secret\t%%s\n' "$s"`, reader)
		out, code := job(fmt.Sprintf("/alice/stolen%d", i), mapper)
		if code == 0 || strings.Contains(out, secret) {
			t.Errorf("a map reading root's file with %q: exit %d:\n%s", reader, code, out)
			continue
		}
		id := mrJobID.FindStringSubmatch(out)
		if id == nil {
			t.Fatalf("no job id in:\n%s", out)
		}
		stderr, _ := c.RunEnv(alice, nil, "cat", fmt.Sprintf("/alice/log/%s/map-00000.a1.stderr", id[1]))
		if strings.Contains(stderr, secret) || !regexp.MustCompile(`(?i)permission denied|no cluster configured`).MatchString(stderr) {
			t.Errorf("the map's stderr with %q does not show a permission error:\n%s", reader, stderr)
		}
		t.Logf("map reading root's file with %q: %s", reader, strings.TrimSpace(stderr))
	}

	// Who the task is: its uid, and whether it reads the task server's key.
	mapper := fmt.Sprintf(`cat >/dev/null; printf 'uid\t%%s\n' "$(id -u)"; if cat %s >/dev/null 2>&1; then r=read; else r=refused; fi; printf 'key\t%%s\n' $r`, tsCred)
	out, code := job("/alice/out", mapper)
	if code != 0 {
		t.Fatalf("alice's job: exit %d:\n%s", code, out)
	}
	if runners := testkit.ReportValue(t, out, "Task runners"); !strings.Contains(runners, addr) || strings.Contains(runners, "local") {
		t.Fatalf("the tasks did not run on the task server: %q", runners)
	}
	lines := mrOutput(t, c, "/alice/out", 1, nil)
	for _, l := range lines {
		k, v, _ := strings.Cut(l, "\t")
		switch {
		case k == "uid" && v == "0":
			t.Errorf("a streaming task ran as uid 0")
		case k == "key" && v != "refused":
			t.Errorf("a task read the task server's key file %s", tsCred)
		}
	}
	if len(lines) != 2 {
		t.Errorf("output %q, want a uid and a key line", lines)
	}
	for name, user := range owners(t, c, "/alice/out") {
		if user != "alice" {
			t.Errorf("alice's output /alice/out/%s is owned by %q", name, user)
		}
	}

	// A plain TCP client (HTTP without TLS) gets no HTTP answer.
	if resp := testkit.PlainHTTP(t, addr); strings.HasPrefix(resp, "HTTP/") {
		t.Errorf("the task server answered plain HTTP:\n%s", resp)
	}
}

// TestMRTaskServerChecksCredentials: a coordinator that speaks the task
// protocol itself gets nothing a job of 'mr run' would not: the task
// server refuses a task without a delegated credential, with the
// submitter's own full credential, with a credential delegated for another
// job or to another user; with alice's delegated credential a map over
// root's 0600 file fails with a permission error. A delegated credential
// asks the namenode for no other and is no superuser, even when the
// superuser asked for it.
func TestMRTaskServerChecksCredentials(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	_, addr := startTaskServer(t, c, c.DNs[0])
	testkit.MRPut(t, c, "/private", map[string][]byte{"secret": []byte("root's secret\n")})
	c.MustRun("chmod", "600", "/private/secret")
	ctx := context.Background()

	aliceFile := c.IssueCredential("alice", auth.RoleUser)
	alice := c.Client(client.Config{CredentialFile: aliceFile})
	defer alice.Close()
	aliceFull, err := auth.LoadCredential(aliceFile)
	if err != nil {
		t.Fatal(err)
	}
	bob := c.Client(client.Config{CredentialFile: c.IssueCredential("bob", auth.RoleUser)})
	defer bob.Close()
	delegated := func(cl *client.Client, job string) []byte {
		t.Helper()
		cred, err := cl.Delegate(ctx, job, time.Hour)
		if err != nil {
			t.Fatalf("delegate: %v", err)
		}
		return cred.PEM()
	}
	r, err := mrexec.Dial(ctx, addr, alice, "")
	if err != nil {
		t.Fatal(err)
	}
	task := mrexec.Task{Job: "job-1", Kind: "map", Dir: "/tmp-job-1", Command: "cat", Partitions: 1, SortBuffer: 1 << 20,
		Input: "/private/secret", End: 1 << 20}
	for _, tc := range []struct {
		what string
		cred []byte
		want string
	}{
		{"no credential", nil, "no delegated credential"},
		{"alice's own credential", aliceFull.PEM(), "not a delegated one"},
		{"a credential for another job", delegated(alice, "job-2"), "delegated for job job-2"},
		{"bob's delegated credential", delegated(bob, "job-1"), "bob's"},
		{"alice's delegated credential", delegated(alice, "job-1"), "permission denied"},
	} {
		task.Credential = tc.cred
		res, err := r.Run(ctx, task)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		t.Logf("task with %s: %s", tc.what, res.Error)
		if !strings.Contains(res.Error, tc.want) {
			t.Errorf("task with %s: error %q, want %q", tc.what, res.Error, tc.want)
		}
	}

	admin := c.Client(client.Config{})
	defer admin.Close()
	cred, err := admin.Delegate(ctx, "job-3", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dc := c.Client(client.Config{Credential: cred})
	defer dc.Close()
	if _, err := dc.Delegate(ctx, "job-4", time.Hour); err == nil || !strings.Contains(err.Error(), "delegated") {
		t.Errorf("a delegated credential got another: %v", err)
	}
	if err := dc.Backup(ctx, filepath.Join(t.TempDir(), "backup.db")); err == nil || !strings.Contains(err.Error(), "superuser") {
		t.Errorf("the superuser's delegated credential made a backup (superuser only): %v", err)
	}
	if _, err := dc.Lookup(ctx, "/private/secret"); err != nil {
		t.Fatalf("lookup: %v", err)
	}
	if err := dc.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Open(ctx, "/private/secret")
		return err
	}); err != nil {
		t.Errorf("the superuser's delegated credential (user admin) cannot open admin's own file: %v", err)
	}
}
