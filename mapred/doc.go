// Package mapred is Plasma MapReduce: jobs whose input, intermediate
// files and output all live in PlasmaFS, run by task servers beside the
// datanodes ('plasma mr taskserver', started by 'plasma cluster up') or in
// the submitting process.
//
// This package is what a job author needs: Job (LoadJob for job files),
// Funcs for a job in Go, Run, its Report, and the Status of running and
// finished jobs (ReadStatus, ListJobs, Kill, WebHandler). The tasks
// themselves, the task servers and the coordinator's side of them (Task,
// Result, Runner, TaskServer, Remote, task users, delegated credentials)
// are in internal/mrexec.
//
// A job (Job, read from TOML by 'plasma mr run') is split into map tasks
// over contiguous blocks of its input files (planSplits; a record never
// spans two tasks) and scheduled on the runner paired with the datanode
// holding most of a split's blocks. A map task feeds its records to the
// job's executable (streaming: any program reading records on stdin and
// writing "key TAB value" lines; or a Go program built with Funcs.ServeTask,
// which combines in its own process when it has a combiner), sorts the
// output by partition and key in a bounded buffer, spills sorted runs to
// PlasmaFS scratch files, merges them into one file per attempt with a
// partition index, written with the local datanode preferred. A reduce
// task reads its partition's range of every map output straight from the
// datanodes (no namenode on the data path once the block lists are
// loaded), merges, runs the reducer and writes its part file. The job's
// output directory appears whole at the end, by one rename committed in
// one transaction.
//
// Failed attempts, and attempts on a task server that died, run again
// (elsewhere when possible) up to the job's attempt limit; a job fails
// only then, with each failed attempt's stderr in the log directory. The
// Report repeats the original's job report (successful and misallocated
// tasks, non-local input, average running tasks, runtime) with counters
// and the namenode commits the job made; Status and the web view show a
// running job.
package mapred
