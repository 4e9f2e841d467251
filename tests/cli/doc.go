// Package cli tests the plasma command line as users see it: error messages, get,
// JSON output, shell habits, params and admin commands, the separate
// benchmark binary, log formats and admin top.
package cli
