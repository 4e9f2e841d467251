package mapred

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/plasmafs/plasma/client"
)

// Local input and output directories.
//
// As in the original (0.6), a job's input and output directories may be
// local, named file::/dir (plasma::/dir or a bare /dir is in PlasmaFS),
// for runs on one machine. Unlike the original, whose tasks then read and
// wrote the local files directly and needed no PlasmaFS at all, the tasks
// here still run on PlasmaFS: the job process copies a local input's
// regular files into a staging directory beside the job's work directory
// before the job, and a local output directory is filled from the
// PlasmaFS output after it, whole or not at all (under a temporary name,
// renamed at the end). So the task servers of a cluster can run such a
// job too: only the submitting machine needs the local directories.

// jobTree splits a job directory by its tree prefix (client.SplitTree):
// local reports a file:: directory, allowed for the input and the output
// only (intermediate files and logs live in PlasmaFS).
func jobTree(name, dir string) (local bool, p string, err error) {
	local, p, err = client.SplitTree(dir)
	if err != nil {
		return false, "", fmt.Errorf("%s directory: %w", name, err)
	}
	if local && (name == "work" || name == "log") {
		return false, "", fmt.Errorf("%s directory %q: must be in PlasmaFS (only the input and the output may be local, file::)", name, dir)
	}
	return local, p, nil
}

// Run runs job j with client c and returns its report. The report is
// also written to the job's log directory; a failed job returns its report
// and an error. A local (file::) input is staged into PlasmaFS first and
// a local output filled at the end (see above).
func Run(ctx context.Context, c *client.Client, j Job, opt Options) (*Report, error) {
	j.Defaults()
	if err := j.Validate(); err != nil {
		return nil, err
	}
	asGiven := j
	localIn, in, _ := jobTree("input", j.Input)
	localOut, out, _ := jobTree("output", j.Output)
	_, j.Work, _ = jobTree("work", j.Work)
	_, j.Log, _ = jobTree("log", j.Log)
	j.Input, j.Output = in, out
	if !localIn && !localOut {
		return runJob(ctx, c, j, opt)
	}
	stage := path.Join(j.Work, ".local-"+newJobID())
	if localOut {
		var err error
		if out, err = filepath.Abs(out); err != nil {
			return nil, err
		}
		if _, err := os.Lstat(out); err == nil {
			return nil, fmt.Errorf("output %s exists", asGiven.Output)
		}
		if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("output %s: its parent directory %s does not exist", asGiven.Output, filepath.Dir(out))
		}
		j.Output = stage + "/output"
	}
	if err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.MkdirAll(ctx, stage, 0o700)
		return err
	}); err != nil {
		return nil, fmt.Errorf("staging directory %s: %w", stage, err)
	}
	defer removeTree(context.WithoutCancel(ctx), c, stage)
	if localIn {
		j.Input = stage + "/input"
		if err := stageInput(ctx, c, in, j.Input, j.Rep); err != nil {
			return nil, fmt.Errorf("input %s: %w", asGiven.Input, err)
		}
	}
	rep, err := runJob(ctx, c, j, opt)
	if err == nil && localOut {
		if err = fetchOutput(ctx, c, j.Output, out); err != nil {
			err = fmt.Errorf("output %s: %w", asGiven.Output, err)
		}
	}
	if rep != nil {
		rep.Input, rep.Output = asGiven.Input, asGiven.Output
		if err != nil && rep.Error == "" {
			rep.Status, rep.Error = "failed", err.Error()
		}
	}
	return rep, err
}

// stageInput copies the regular files of local directory dir into the new
// PlasmaFS directory to, with replication rep.
func stageInput(ctx context.Context, c *client.Client, dir, to string, rep int) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Mkdir(ctx, to, 0o700)
		return err
	}); err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		_, err = c.CopyIn(ctx, f, to+"/"+e.Name(), client.CopyOptions{Rep: rep, Mode: 0o600, CommitEvery: 1 << 30})
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// fetchOutput copies the files of PlasmaFS directory from into the new
// local directory to: into a temporary directory beside it, renamed to
// to once every file is complete.
func fetchOutput(ctx context.Context, c *client.Client, from, to string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(to), "."+filepath.Base(to)+".plasma-mr-")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	tx := c.Begin()
	defer tx.Abort(ctx)
	ents, err := tx.ReadDir(ctx, from)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := fetchFile(ctx, tx, from+"/"+e.Name, filepath.Join(tmp, e.Name)); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, to); err != nil {
		return err
	}
	done = true
	return nil
}

func fetchFile(ctx context.Context, tx *client.Txn, from, to string) error {
	src, err := tx.Open(ctx, from)
	if err != nil {
		return err
	}
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = src.WriteTo(dst)
	if err == nil {
		err = dst.Sync()
	}
	return errors.Join(err, dst.Close())
}
