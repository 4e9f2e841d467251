// Package mr tests MapReduce against real processes: jobs, formats, combiners, the
// Go API, streaming, the web status, task identity and isolation.
package mr
