// Package mrexec runs the tasks of Plasma MapReduce jobs (package mapred):
// one attempt of a map or reduce task (Task, Execute, Result), in the job's
// process (Local) or on a task server (TaskServer, reached through Remote),
// possibly as another OS user (TaskUser) and with the job's delegated
// credential. It also holds what the tasks do with records: input formats
// and their conversion, extract modes and partitions, the bounded sort,
// spills and merges of map output.
//
// mapred (the coordinator: planning, scheduling, reports and status)
// imports this package, never the other way round.
package mrexec
