package namenode_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine (a connection
// handler, the committer, the reaper, a client's keepalive) is still
// running once they are done: every test must stop what it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
