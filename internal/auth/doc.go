// Package auth holds PlasmaFS security: the cluster's secrets (a CA that
// signs every identity, and the key datanode tickets are made with),
// credentials (a certificate, its key and the CA in one PEM file that can be
// copied to another machine), the three security levels of a connection,
// and datanode tickets.
//
// Levels: "none" trusts whatever a client claims. "auth" runs a TLS 1.3
// handshake with certificates on both sides, binds the connection to the
// peer's identity and then continues in plaintext (like the original's
// SCRAM authentication: authenticated, not encrypted). "privacy" keeps the
// TLS 1.3 session, so everything is encrypted and integrity-protected.
package auth
