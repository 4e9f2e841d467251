package meta_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
)

// TestOpenByURL: a store is opened by URL through the engine registry (a
// plain path means SQLite), and what one opening wrote the next reads.
func TestOpenByURL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "nn.db")
	s, err := meta.Open(ctx, "sqlite://"+path, meta.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, []*meta.Change{{InoLimit: 77}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = meta.Open(ctx, path, meta.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, err := s.Load(ctx)
	if err != nil || snap.InoLimit != 77 {
		t.Fatalf("reopened by path: ino limit %v (%v), want 77", snap, err)
	}
	if got := meta.LocalPath("sqlite://" + path); got != path {
		t.Fatalf("LocalPath = %q", got)
	}
	for _, bad := range []string{"sqlite://host/x.db", "nosuch://x", "sqlite://"} {
		if _, err := meta.Open(ctx, bad, meta.OpenOptions{Create: true}); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
	if _, err := meta.Open(ctx, "nosuch://x", meta.OpenOptions{}); err == nil || !strings.Contains(err.Error(), "sqlite") {
		t.Errorf("an unknown engine's error does not list the known ones: %v", err)
	}
}
