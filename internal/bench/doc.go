// Package bench reproduces the seed documents' measurements against a
// running PlasmaFS cluster and runs, in the same process and run, the
// reference each is compared with: the local filesystem on the same disk, a
// raw TCP ping-pong, raw SQLite commits. Every result carries both figures
// and their ratio. Benchmarks are never part of the test suite.
package bench
