package client_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the package's tests and examples against an in-process
// cluster, stops it, and fails if any goroutine is still running: a
// client's keepalive, a background flush, a read-ahead fetch or a server
// goroutine the cluster did not stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(withExampleCluster{m})
}
