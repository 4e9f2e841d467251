package meta

import (
	"path/filepath"
	"testing"
)

// TestBootEpoch: every raise is above the last one, at least the floor,
// and survives a reopen.
func TestBootEpoch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := OpenSQLite(path, false)
	if err != nil {
		t.Fatal(err)
	}
	e1, err := s.RaiseBootEpoch(0)
	if err != nil || e1 != 1 {
		t.Fatalf("first epoch %d %v", e1, err)
	}
	if e, err := s.RaiseBootEpoch(1000); err != nil || e != 1000 {
		t.Fatalf("floor 1000: %d %v", e, err)
	}
	if e, err := s.RaiseBootEpoch(5); err != nil || e != 1001 {
		t.Fatalf("floor below the stored epoch: %d %v", e, err)
	}
	s.Close()
	s2, err := OpenSQLite(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if e, err := s2.RaiseBootEpoch(0); err != nil || e != 1002 {
		t.Fatalf("after reopening: %d %v", e, err)
	}
}
