// Package lease tests directory leases against real processes: who may hold
// them, hostile lease requests, renames during a grant and the mount's use
// of leases.
package lease
