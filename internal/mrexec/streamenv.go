package mrexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	var d *os.File
	var err error
	if e.user != nil {
		// The commands run as the task account: the directory is its own.
		d, err = e.user.workDir(name)
	} else {
		var dir string
		if dir, err = os.MkdirTemp("", "plasmamr-"+name+"-"); err == nil {
			if d, err = makeLocalLog(dir); err != nil {
				os.RemoveAll(dir)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("local directory: %w", err)
	}
	e.localDir, e.local, e.localLog = d, d.Name(), filepath.Join(d.Name(), localLogName)
	return nil
}

// endLocalDir copies the regular files of the attempt's local log
// directory into the job's log directory, each named with the task prefix
// (prepended unless the name begins with it), and removes the local
// directory. A file that cannot be kept is reported on the attempt's
// standard error; it does not fail the attempt. The files are read
// through the directory opened when it was made (localdir.go).
func (e *exec1) endLocalDir(ctx context.Context) {
	if e.localDir == nil {
		return
	}
	defer os.RemoveAll(e.local)
	defer e.localDir.Close()
	if e.jobLogDir() == "" {
		return
	}
	logDir, err := openLocalLog(e.localDir)
	if errors.Is(err, fs.ErrNotExist) {
		return // the commands removed it
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "plasma mr: PLASMAMR_LOCAL_LOG_DIR: %v\n", err)
		return
	}
	defer logDir.Close()
	ents, err := logDir.ReadDir(-1)
	if err != nil || len(ents) == 0 {
		return
	}
	prefix := e.t.taskPrefix()
	err = e.c.Txn(context.WithoutCancel(ctx), func(ctx context.Context, tx *client.Txn) error {
		for _, ent := range ents {
			src, err := openLogFile(logDir, ent.Name(), e.user)
			if err != nil {
				fmt.Fprintf(e.stderr, "plasma mr: not kept from PLASMAMR_LOCAL_LOG_DIR: %v\n", err)
				continue
			}
			name := ent.Name()
			if !strings.HasPrefix(name, prefix) {
				name = prefix + name
			}
			err = copyLogFile(ctx, tx, src, path.Join(e.jobLogDir(), name))
			src.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(e.stderr, "plasma mr: keeping the files of PLASMAMR_LOCAL_LOG_DIR in %s: %v\n", e.jobLogDir(), err)
	}
}

func copyLogFile(ctx context.Context, tx *client.Txn, src io.Reader, to string) error {
	dst, err := tx.CreateFile(ctx, to, client.CreateOptions{})
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		return fmt.Errorf("%s: %w", to, err)
	}
	return dst.Close()
}
