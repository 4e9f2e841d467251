package meta

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenRefusesMissingDatabaseUnlessFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nn.db")
	if _, err := OpenSQLiteWith(path, SQLiteOptions{}); !errors.Is(err, ErrNoDatabase) || !strings.Contains(err.Error(), "-format") {
		t.Fatalf("open of a missing database: %v", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a refused open created the database")
	}
	s, err := OpenSQLiteWith(path, SQLiteOptions{Format: true})
	if err != nil {
		t.Fatal(err)
	}
	ns := s.Namespace()
	if len(ns) != 32 {
		t.Fatalf("namespace id %q", ns)
	}
	if err := s.Apply(context.Background(), []*Change{{PutInodes: []Inode{{Ino: 2, Type: TypeDir, Nlink: 2}}, PutEntries: []Entry{{EntryKey{1, "d"}, 2}}}}); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		st, err := os.Stat(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s%s has mode %v, want 0600", path, suffix, st.Mode().Perm())
		}
	}
	s.Close()
	if _, err := OpenSQLiteWith(path, SQLiteOptions{Format: true}); err == nil || !strings.Contains(err.Error(), "already holds a namespace") {
		t.Fatalf("-format of an existing namespace: %v", err)
	}
	s, err = OpenSQLiteWith(path, SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Namespace() != ns {
		t.Fatalf("namespace id changed across reopen: %q → %q", ns, s.Namespace())
	}
	// Another format elsewhere makes another namespace.
	o, err := OpenSQLiteWith(filepath.Join(t.TempDir(), "other.db"), SQLiteOptions{Format: true})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.Namespace() == ns {
		t.Fatal("two formats made the same namespace id")
	}
}

func TestOpenRefusesLostWAL(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nn.db")
	s, err := OpenSQLiteWith(path, SQLiteOptions{Format: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(context.Background(), []*Change{{PutInodes: []Inode{{Ino: 2, Type: TypeDir, Nlink: 2}}, PutEntries: []Entry{{EntryKey{1, "d"}, 2}}}}); err != nil {
		t.Fatal(err)
	}
	// A crash: the database is never closed, its WAL holds the commit.
	// Copy the database file alone, as a careless backup would.
	crashed := filepath.Join(dir, "copy.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crashed, b, 0o600); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := OpenSQLiteWith(crashed, SQLiteOptions{}); !errors.Is(err, ErrLostWAL) || !strings.Contains(err.Error(), "-wal") {
		t.Fatalf("open of a database whose WAL is gone: %v", err)
	}
	c, err := OpenSQLiteWith(crashed, SQLiteOptions{AcceptLostWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestBackupIsConsistentAndRestorable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nn.db")
	s, err := OpenSQLiteWith(path, SQLiteOptions{Format: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(context.Background(), []*Change{{PutInodes: []Inode{{Ino: 2, Type: TypeDir, Nlink: 2}}, PutEntries: []Entry{{EntryKey{1, "d"}, 2}}}}); err != nil {
		t.Fatal(err)
	}
	bak := filepath.Join(dir, "backup.db")
	if err := s.Backup(bak); err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(bak); err == nil {
		t.Fatal("backup over an existing file")
	}
	if st, err := os.Stat(bak); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v %v", st, err)
	}
	ns := s.Namespace()
	s.Close()
	// Offline: from a stopped namenode's database, read-only.
	ro, err := OpenSQLiteWith(path, SQLiteOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.Backup(filepath.Join(dir, "offline.db")); err != nil {
		t.Fatal(err)
	}
	ro.Close()
	for _, f := range []string{bak, filepath.Join(dir, "offline.db")} {
		r, err := OpenSQLiteWith(f, SQLiteOptions{})
		if err != nil {
			t.Fatalf("restore %s: %v", f, err)
		}
		snap, err := r.Load(context.Background())
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Entries) != 1 || snap.Entries[0].Name != "d" || r.Namespace() != ns {
			t.Fatalf("%s: entries %+v namespace %q (want %q)", f, snap.Entries, r.Namespace(), ns)
		}
	}
}
