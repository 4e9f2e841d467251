// Package auth holds PlasmaFS security: the cluster's secrets (a CA that
// signs every identity, and the key datanode tickets are made with),
// credentials (a certificate, its key and the CA in one PEM file that can be
// copied to another machine), the security levels of a connection, and
// datanode tickets.
//
// Roles are attributes of the certificate: user, superuser (the only role
// that bypasses permission checks), namenode and datanode. Only daemon
// certificates carry server usage, and Client checks the server's role.
//
// Levels, weakest first (a server's level is the least it accepts): "none"
// trusts whatever a client claims. "auth" runs a TLS 1.3 handshake with
// certificates on both sides, binds the connection to the peer's identity
// and then continues in plaintext (like the original's SCRAM
// authentication): it protects nothing after the handshake. "integrity"
// continues in plaintext too, but every record carries a MAC keyed from the
// handshake (integrity.go). "privacy" keeps the TLS 1.3 session, so
// everything is encrypted and integrity-protected.
package auth
