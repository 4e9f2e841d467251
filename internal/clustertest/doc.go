// Package clustertest starts PlasmaFS clusters for tests: either real
// plasma processes (namenode and datanodes, each its own process, on
// 127.0.0.1 with temporary directories) for integration and fault tests,
// or the same components inside the test process (for examples and the
// race detector). Teardown is registered with t.Cleanup.
package clustertest
