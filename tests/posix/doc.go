// Package posix tests POSIX semantics through each interface (the client library,
// the FUSE mount, the NFS bridge) with one table of cases, and the NFS
// bridge's own behaviour: procedures, identities, ownership and exports.
package posix
