package mr

import (
	"context"
	"encoding/pem"
	"os"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/mrexec"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMRTaskServerTakesNoPaddedCredential: a task server takes only
// credentials the namenode delegated, which it tells by their chain (a
// third certificate, the delegation certificate, between the leaf and the
// CA). A coordinator that pads a full credential (here the superuser's,
// which the namenode would serve as the superuser) with a third
// certificate that signs nothing must be refused, not run the task with
// it.
func TestMRTaskServerTakesNoPaddedCredential(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	_, addr := startTaskServer(t, c, c.DNs[0])
	testkit.MRPut(t, c, "/private", map[string][]byte{"secret": []byte("root's secret\n")})
	c.MustRun("chmod", "600", "/private/secret")
	ctx := context.Background()

	admin := c.Client(client.Config{})
	defer admin.Close()
	full, err := os.ReadFile(c.AdminCred)
	if err != nil {
		t.Fatal(err)
	}
	// certificate, key, CA  ->  certificate, key, CA (padding), CA
	var blocks []*pem.Block
	for rest := full; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		blocks = append(blocks, b)
	}
	if len(blocks) != 3 {
		t.Fatalf("the admin credential has %d PEM blocks", len(blocks))
	}
	var padded []byte
	for _, b := range append(blocks, blocks[2]) {
		padded = append(padded, pem.EncodeToMemory(b)...)
	}

	r, err := mrexec.Dial(ctx, addr, admin, "")
	if err != nil {
		t.Fatal(err)
	}
	task := mrexec.Task{Job: "", Kind: "map", Dir: "/tmp-job-x", Command: "cat", Partitions: 1, SortBuffer: 1 << 20,
		Input: "/private/secret", End: 1 << 20, Credential: padded}
	res, err := r.Run(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("task with a padded full credential: error %q", res.Error)
	if !strings.Contains(res.Error, "not a delegated one") {
		t.Errorf("a task with the superuser's full credential padded to look delegated was not refused as such: %q (output %q)", res.Error, res.Output)
	}
}
