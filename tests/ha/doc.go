// Package ha tests replicated namenodes (a namenode group, issue 22)
// against real processes on loopback: failover, catch-up, redirects and
// what a group below a majority answers.
package ha
