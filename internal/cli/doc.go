// Package cli implements the plasma command line: argument parsing, the
// daemons' start-up, and the client commands with the original Plasma's
// syntax (single-dash long options such as "put -rep 2"). It is the only
// package that reads flags and environment variables.
package cli
