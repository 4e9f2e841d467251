package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/namenode"
)

// cmdNamenodeMigrate copies a stopped namenode's metadata from one store
// to another (SQLite to PostgreSQL or back) and checks the copy equal.
func cmdNamenodeMigrate(ctx context.Context, args []string) error {
	f := newFlags("namenode migrate", "-from STORE -to STORE", `Copy a stopped namenode's metadata from one store to another: a SQLite file
(sqlite:///path/namenode.db, or a plain path) or a PostgreSQL database
(postgres://user@host/db). The commits still only in the source's commit log
are applied to the source first. The target must be new: a database without
a namespace (an empty PostgreSQL database, or a file that does not exist).
Every table of the copy is then compared with the source. Start the namenode
on the copy with a new commit log (-log): the copy holds the old log's
commits, and is a checkpoint of its own.`, false)
	from := f.String("from", "", "the source store (required; its namenode must be stopped)")
	to := f.String("to", "", "the target store (required)")
	fromLog := f.String("from-log", "", "the source namenode's commit log (default: the SQLite source's path + \".log\";\nrequired for a PostgreSQL source whose namenode logged commits)")
	noLog := f.Bool("no-log", false, "the source has no commit log to apply (a PostgreSQL source whose log is gone or empty)")
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.pos) != 0 {
		return usagef("unexpected argument %q", f.pos[0])
	}
	if *from == "" || *to == "" {
		return usagef("-from and -to are required")
	}
	logPath := *fromLog
	if logPath == "" && !*noLog {
		local := meta.LocalPath(*from)
		if local == "" {
			return usagef("-from %s is not a local file: name its namenode's commit log with -from-log (or say -no-log)", *from)
		}
		logPath = local + ".log"
	}
	src, err := meta.Open(ctx, *from, meta.OpenOptions{})
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.Close()
	if logPath != "" {
		if _, err := os.Stat(logPath); err == nil {
			if err := namenode.ReplayLog(src, logPath); err != nil {
				return fmt.Errorf("apply the commit log %s to the source: %w", logPath, err)
			}
		} else if *fromLog != "" || !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the source's commit log: %w", err)
		}
	}
	if local := meta.LocalPath(*to); local != "" {
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			return err
		}
	}
	dst, err := meta.Open(ctx, *to, meta.OpenOptions{Format: true})
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	stats, err := meta.Copy(ctx, src, dst)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	ns := ""
	if n, ok := src.(meta.Namespacer); ok {
		ns = " " + n.Namespace()
	}
	fmt.Fprintf(stdout, "namespace%s copied from %s to %s: %s; every table compared equal.\n", ns, meta.Redact(*from), meta.Redact(*to), stats)
	fmt.Fprintf(stdout, "Start the namenode with -db %s and a new commit log (-log); the old one is in the copy.\n", meta.Redact(*to))
	return nil
}

// checkLogNamespace refuses a store of another namespace than the commit
// log's: the log and the store are kept apart (PostgreSQL), so -db can
// name another namenode's database. The namespace the log belongs to is
// recorded beside it (log + ".namespace") at the first start.
func checkLogNamespace(logPath string, store meta.Store, db string, format bool) error {
	ns, ok := store.(meta.Namespacer)
	if !ok {
		return nil
	}
	file := logPath + ".namespace"
	b, err := os.ReadFile(file)
	switch {
	case err == nil && !format:
		if rec := strings.TrimSpace(string(b)); rec != ns.Namespace() {
			return fmt.Errorf("metadata store %s holds namespace %s, but the commit log %s belongs to namespace %s (%s): -db names another namenode's database, or -log another namenode's log",
				meta.Redact(db), ns.Namespace(), logPath, rec, file)
		}
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("commit log namespace: %w", err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(ns.Namespace()+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the commit log's namespace: %w", err)
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("record the commit log's namespace: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("record the commit log's namespace: %w", err)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
