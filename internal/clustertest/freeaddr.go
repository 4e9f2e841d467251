package clustertest

import (
	"testing"

	"github.com/plasmafs/plasma/internal/loopback"
)

// FreeAddr returns a loopback address, for a process to listen on, whose
// port is free at the moment (loopback.FreeAddr: below the kernel's
// ephemeral range, where the outgoing connections of tests running in
// parallel cannot take it before the process binds it).
func FreeAddr(t testing.TB) string {
	t.Helper()
	a, err := loopback.FreeAddr()
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return a
}
