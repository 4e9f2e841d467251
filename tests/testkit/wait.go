package testkit

import (
	"testing"
	"time"
)

// AwaitCond polls cond until it holds, failing the test after limit.
func AwaitCond(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, not timing
	}
}
