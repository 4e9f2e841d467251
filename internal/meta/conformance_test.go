package meta_test

import (
	"path/filepath"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/meta/metatest"
)

func TestSQLiteConformance(t *testing.T) {
	metatest.Run(t, metatest.Engine{
		New: func(t *testing.T) meta.Store {
			s, err := meta.OpenSQLite(filepath.Join(t.TempDir(), "nn.db"), false)
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
			s2, err := meta.OpenSQLite(path, false)
			if err != nil {
				t.Fatal(err)
			}
			return s2
		},
	})
}
