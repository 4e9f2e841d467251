// Package replication tests the datanode operations: replicas restored
// after a datanode dies, replication changes carried out, drains, scrub
// and balance, against real processes.
package replication
