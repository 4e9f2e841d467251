package namenode

import (
	"errors"
	"testing"
)

func TestLockTableExclusiveConflicts(t *testing.T) {
	lt := newLockTable()
	a, b := &Txn{}, &Txn{}
	if err := lt.exclusive(a, inodeKey(5)); err != nil {
		t.Fatal(err)
	}
	if err := lt.exclusive(a, inodeKey(5)); err != nil {
		t.Fatalf("re-lock by the owner: %v", err)
	}
	if len(a.locks) != 1 {
		t.Fatalf("owner recorded %d keys, want 1", len(a.locks))
	}
	if err := lt.exclusive(b, inodeKey(5)); !errors.Is(err, errConflict) {
		t.Fatalf("second exclusive: %v, want conflict", err)
	}
	if err := lt.shared(b, inodeKey(5)); !errors.Is(err, errConflict) {
		t.Fatalf("shared under exclusive: %v, want conflict", err)
	}
	// An entry key and an inode key with the same number are different locks.
	if err := lt.exclusive(b, entryKey(5, "x")); err != nil {
		t.Fatal(err)
	}
	if err := lt.exclusive(a, entryKey(5, "y")); err != nil {
		t.Fatal(err)
	}
	lt.releaseAll(a)
	if a.locks != nil {
		t.Fatal("release left keys on the holder")
	}
	if err := lt.exclusive(b, inodeKey(5)); err != nil {
		t.Fatalf("after release: %v", err)
	}
	lt.releaseAll(b)
	if lt.held() != 0 {
		t.Fatalf("%d keys still in the table after every holder released", lt.held())
	}
}

func TestLockTableShared(t *testing.T) {
	lt := newLockTable()
	a, b := &Txn{}, &Txn{}
	for _, tx := range []*Txn{a, b, a} {
		if err := lt.shared(tx, inodeKey(1)); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.locks) != 1 {
		t.Fatalf("shared twice recorded %d keys, want 1", len(a.locks))
	}
	// Shared by two: no one may take it exclusively.
	if err := lt.exclusive(a, inodeKey(1)); !errors.Is(err, errConflict) {
		t.Fatalf("upgrade while shared by another: %v, want conflict", err)
	}
	lt.releaseAll(b)
	if lt.held() != 1 {
		t.Fatalf("held %d, want 1 (a still shares)", lt.held())
	}
	// Shared by a alone: a may upgrade, and still holds it shared after.
	if err := lt.exclusive(a, inodeKey(1)); err != nil {
		t.Fatalf("upgrade by the only holder: %v", err)
	}
	if err := lt.shared(b, inodeKey(1)); !errors.Is(err, errConflict) {
		t.Fatalf("shared after upgrade: %v, want conflict", err)
	}
	if err := lt.shared(a, inodeKey(1)); err != nil {
		t.Fatalf("owner asking shared: %v", err)
	}
	lt.releaseAll(a)
	if lt.held() != 0 {
		t.Fatalf("%d keys left", lt.held())
	}
	if err := lt.exclusive(b, inodeKey(1)); err != nil {
		t.Fatal(err)
	}
}
