package meta_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/meta/metatest"
)

func TestSQLiteConformance(t *testing.T) {
	metatest.Run(t, metatest.Engine{
		New: func(t *testing.T) meta.Store {
			// Through the engine registry, as the namenode opens it.
			s, err := meta.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "nn.db"), meta.OpenOptions{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Reopen: func(t *testing.T, s meta.Store) meta.Store {
			path := s.(*meta.SQLite).Path()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := meta.Open(context.Background(), path, meta.OpenOptions{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			return s2
		},
	})
}
