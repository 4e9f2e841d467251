// Package extend tests appending to and extending files (the extension protocol)
// against real processes: concurrent appenders and readers, failures of
// datanodes and the namenode, power cuts, FUSE appenders and stale tickets.
package extend
