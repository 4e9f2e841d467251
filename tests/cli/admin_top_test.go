package cli

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestAdminTop (issue 25): 'plasma admin top' shows, from the namenode's
// /metrics, the commits and the operations per second of the work going
// on (creates, while a client makes directories) and the live datanodes.
func TestAdminTop(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Admin: true})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c.Run(nil, "mkdir", "-p", fmt.Sprintf("/top/%d", i))
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	// Each update covers one interval; repeat until one saw a create (a
	// loaded machine may run none in a given second).
	var out string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		var code int
		out, code = c.Run(nil, "admin", "top", "-admin", c.NN.AdminAddr, "-n", "1", "-interval", "1s")
		if code != 0 {
			t.Fatalf("admin top: exit %d: %s", code, out)
		}
		if strings.Contains(out, "\ncreate ") {
			break
		}
	}
	for _, want := range []string{"commits ", "fsyncs ", "datanodes 2 live, 0 dead", "OPERATION", "\ncreate ", "\ncommit "} {
		if !strings.Contains(out, want) {
			t.Errorf("admin top shows no %q:\n%s", want, out)
		}
	}
}
