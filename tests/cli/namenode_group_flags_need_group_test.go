package cli

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestNamenodeGroupFlagsNeedGroup: the flags of a namenode group member
// (-id, -log-keep, -raft-dial, ...) given to a single namenode are refused
// with a usage error naming them, instead of a namenode that starts and
// silently ignores them; and a refused -join leaves no database behind
// (it used to create a new, empty namespace at -db before refusing).
func TestNamenodeGroupFlagsNeedGroup(t *testing.T) {
	bin := clustertest.Binary(t)
	dir := t.TempDir()
	for _, extra := range [][]string{
		{"-id", "3"},
		{"-log-keep", "100", "-snapshot-interval", "1s"},
		{"-raft-dial", "1=127.0.0.1:5"},
	} {
		db := filepath.Join(dir, strings.TrimPrefix(extra[0], "-")+".db")
		args := append([]string{"namenode", "-format", "-security", "none", "-db", db, "-listen", "127.0.0.1:0"}, extra...)
		out, code := runUntilServingOrExit(t, bin, args...)
		if code != 2 || !strings.Contains(out, extra[0]) || !strings.Contains(out, "only for a member of a namenode group") {
			t.Errorf("plasma %s: exit %d, want 2 and a message naming %s and -peers:\n%s", strings.Join(args, " "), code, extra[0], out)
		}
	}

	for _, args := range [][]string{
		{"-join", "abcd"},
		{"-join", "abcd", "-id", "4", "-peers", "1=127.0.0.1:7001"},
	} {
		db := filepath.Join(dir, "join.db")
		all := append([]string{"namenode", "-security", "none", "-db", db, "-listen", "127.0.0.1:0"}, args...)
		out, code := runUntilServingOrExit(t, bin, all...)
		if code != 2 {
			t.Errorf("plasma %s: exit %d, want 2:\n%s", strings.Join(all, " "), code, out)
		}
		if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("plasma %s was refused but left %s behind (stat: %v)", strings.Join(all, " "), db, err)
			os.Remove(db)
		}
	}
}

// runUntilServingOrExit runs bin with args until it exits (its output and
// exit code) or logs that it serves (a failure: it is killed, code -1).
func runUntilServingOrExit(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var out strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "namenode serving") {
			cmd.Process.Kill()
			cmd.Wait()
			pr.Close()
			t.Errorf("plasma %s started serving instead of refusing its flags", strings.Join(args, " "))
			return out.String(), -1
		}
	}
	pr.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("plasma %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), 0
}
