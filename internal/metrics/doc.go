// Package metrics is what every Plasma daemon shares to be watched: a
// Prometheus registry with the Go runtime and process collectors, request
// counters for the daemons that have no richer instrumentation, the admin
// HTTP server (/metrics, and pages a daemon adds) with its access rule,
// and a ring of recent warnings and errors from the daemon's log.
//
// Access rule of the admin server: a client whose address is in the open
// networks (by default the loopback networks, 127.0.0.0/8 and ::1) needs
// no credential; any other client must connect over TLS (on the same
// port) with a client certificate of the cluster CA, or is refused with
// 403. The admin server binds loopback by default; a daemon without a
// credential refuses an admin address that is not loopback, since nobody
// but local clients could ever use it.
package metrics
