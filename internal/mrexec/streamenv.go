package mrexec

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/plasmafs/plasma/client"
)

// The environment of a task's commands: what the original's streaming
// mode set (Mapred_streaming), beside this implementation's own
// variables (exec1.env).
//
//	PLASMAMR_NAME           the job's name
//	PLASMAMR_JOB_ID         the job's id
//	PLASMAMR_REQ_ID         the attempt's name (map-00003.a1), unique in the job
//	PLASMAMR_TASK_PREFIX    prefix of the attempt's log files (map-00003.a1-)
//	PLASMAMR_LOCAL_DIR      a local directory of the attempt, removed when it ends
//	PLASMAMR_LOCAL_LOG_DIR  a local directory whose files go to the job's log
//	                        directory in PlasmaFS when the attempt ends
//	PLASMAMR_INPUT_DIR      the job's input directory in PlasmaFS
//	PLASMAMR_OUTPUT_DIR     the job's output directory in PlasmaFS
//	PLASMAMR_WORK_DIR       the job's own directory in the work directory
//	PLASMAMR_LOG_DIR        the job's log directory in PlasmaFS (LOG/JOBID)
//	PLASMAMR_BIGBLOCK_SIZE  the split size: input bytes per map task
//	PLASMAMR_PARTITIONS     the number of partitions
//	PLASMAMR_PARTITION      the reduce task's partition (reduce only)

// taskPrefix is the prefix of the attempt's files in the log directory.
func (t *Task) taskPrefix() string { return t.AttemptName() + "-" }

// originalEnv returns the variables of the original's streaming mode that
// exec1.env does not set itself.
func (e *exec1) originalEnv() []string {
	t := e.t
	return []string{
		"PLASMAMR_NAME=" + t.JobName,
		"PLASMAMR_REQ_ID=" + t.AttemptName(),
		"PLASMAMR_TASK_PREFIX=" + t.taskPrefix(),
		"PLASMAMR_LOCAL_DIR=" + e.local,
		"PLASMAMR_LOCAL_LOG_DIR=" + e.localLog,
		"PLASMAMR_INPUT_DIR=" + t.InputDir,
		"PLASMAMR_OUTPUT_DIR=" + t.OutputDir,
		"PLASMAMR_LOG_DIR=" + e.jobLogDir(),
		"PLASMAMR_BIGBLOCK_SIZE=" + strconv.FormatInt(t.BigblockSize, 10),
	}
}

// jobLogDir is the job's directory in the log directory ("" when the
// coordinator did not say).
func (e *exec1) jobLogDir() string {
	if e.t.LogDir == "" {
		return ""
	}
	return path.Join(e.t.LogDir, e.t.Job)
}

// makeLocalDir creates the attempt's local directory and its log
// directory.
func (e *exec1) makeLocalDir() error {
	name := strings.NewReplacer("/", "_", string(filepath.Separator), "_").Replace(e.t.Job + "-" + e.t.AttemptName())
	var dir string
	var err error
	if e.user != nil {
		// The commands run as the task account: the directory is its own.
		dir, err = e.user.workDir(name)
	} else {
		dir, err = os.MkdirTemp("", "plasmamr-"+name+"-")
	}
	if err != nil {
		return fmt.Errorf("local directory: %w", err)
	}
	e.local, e.localLog = dir, filepath.Join(dir, "log")
	err = os.Mkdir(e.localLog, 0o700)
	if err == nil && e.user != nil {
		err = os.Chown(e.localLog, int(e.user.UID), int(e.user.GID))
	}
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("local log directory: %w", err)
	}
	return nil
}

// endLocalDir copies the regular files of the attempt's local log
// directory into the job's log directory, each named with the task prefix
// (prepended unless the name begins with it), and removes the local
// directory. A file that cannot be kept is reported on the attempt's
// standard error; it does not fail the attempt.
func (e *exec1) endLocalDir(ctx context.Context) {
	if e.local == "" {
		return
	}
	defer os.RemoveAll(e.local)
	ents, err := os.ReadDir(e.localLog)
	if err != nil || len(ents) == 0 || e.jobLogDir() == "" {
		return
	}
	prefix := e.t.taskPrefix()
	err = e.c.Txn(context.WithoutCancel(ctx), func(ctx context.Context, tx *client.Txn) error {
		for _, ent := range ents {
			if !ent.Type().IsRegular() {
				continue
			}
			name := ent.Name()
			if !strings.HasPrefix(name, prefix) {
				name = prefix + name
			}
			if err := copyLogFile(ctx, tx, filepath.Join(e.localLog, ent.Name()), path.Join(e.jobLogDir(), name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(e.stderr, "plasma mr: keeping the files of PLASMAMR_LOCAL_LOG_DIR in %s: %v\n", e.jobLogDir(), err)
	}
}

func copyLogFile(ctx context.Context, tx *client.Txn, from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := tx.CreateFile(ctx, to, client.CreateOptions{})
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		return fmt.Errorf("%s: %w", to, err)
	}
	return dst.Close()
}
