// Package clusterup tests 'plasma cluster up' and its supervisor: restarts and
// back-off, settings, admin ports, a cluster with a mount, MapReduce or
// PostgreSQL.
package clusterup
