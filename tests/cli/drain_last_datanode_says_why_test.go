package cli

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestDrainLastDatanodeSaysWhy: draining the only datanode in service
// leaves nowhere for its replicas or for new files. 'plasma admin
// datanode drain ID -wait' says that nothing can move and how to end it
// (it used to print "0 copies in flight" and wait silently for ever), and
// a put says that the alive datanode is draining (it used to say "only 0
// datanodes are alive" of a datanode alive and heartbeating).
func TestDrainLastDatanodeSaysWhy(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, Size: 16 << 20})
	if out, code := c.Run([]byte("some data\n"), "put", "-stdin", "/f"); code != 0 {
		t.Fatalf("put: exit %d:\n%s", code, out)
	}
	c.MustRun("admin", "datanode", "drain", "1")
	out, code := c.Run([]byte("more\n"), "put", "-stdin", "/g")
	if code == 0 || !strings.Contains(out, "disabled or draining") || !strings.Contains(out, "admin datanode enable") {
		t.Errorf("put with the only datanode draining: exit %d:\n%s\nwant a refusal saying it is draining", code, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Bin, "admin", "datanode", "drain", "1", "-wait")
	cmd.Env = c.Env()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var seen strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "no other datanode is in service") && strings.Contains(sc.Text(), "admin datanode enable 1") {
			return
		}
	}
	t.Fatalf("drain -wait of the only datanode never said why nothing moves:\n%s", seen.String())
}
