// Package testkit holds what the integration test packages under tests/ share: local
// clusters ('plasma cluster up'), FUSE mounts and NFS bridges started as real
// processes, random data, whole-file reads and writes, fsck checks, raw
// requests to the namenode and datanodes, MapReduce job helpers, metrics
// scraping and waiting for a condition with a deadline. Each test package
// under tests/ is a subject and runs as its own process, in parallel with
// the others (go test ./tests/...).
package testkit
