// Package txn tests transactions against real processes: concurrent writers,
// readers of old versions, unlink while open, commit round trips and the
// life of a transaction across a lost connection.
package txn
