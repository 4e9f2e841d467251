// Package kv tests the key-value store (kv) against real processes, including
// corruption and power cuts.
package kv
