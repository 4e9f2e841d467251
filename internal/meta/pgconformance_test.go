package meta_test

import (
	"context"
	"sync"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/meta/metatest"
	"github.com/plasmafs/plasma/internal/pgtest"
)

// TestPostgresConformance runs the suite SQLite passes against a
// throwaway PostgreSQL server, one new database per store.
func TestPostgresConformance(t *testing.T) {
	pg := pgtest.Start(t)
	var mu sync.Mutex
	urls := map[meta.Store]string{}
	open := func(t *testing.T, url string) meta.Store {
		s, err := meta.Open(context.Background(), url, meta.OpenOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		urls[s] = url
		mu.Unlock()
		return s
	}
	metatest.Run(t, metatest.Engine{
		New: func(t *testing.T) meta.Store { return open(t, pg.CreateDB(t)) },
		Reopen: func(t *testing.T, s meta.Store) meta.Store {
			mu.Lock()
			url := urls[s]
			mu.Unlock()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, url)
		},
	})
}
