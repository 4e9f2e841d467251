// Package postgres tests the PostgreSQL metadata store: migration from SQLite,
// pg_dump, restarts and power cuts.
package postgres
