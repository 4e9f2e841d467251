package vfs

import (
	"testing"
	"time"
)

// TestScanAfterFailedListingWaits: a directory is listed at the
// scanAfterMisses-th namenode lookup, one listing at a time; after a
// listing failed (a directory the mount may search but not read), not
// again for scanFailedWait, however many lookups follow.
func TestScanAfterFailedListingWaits(t *testing.T) {
	s := newDirScans()
	ttl := time.Hour
	for i := 1; i < scanAfterMisses; i++ {
		if s.missed(7, ttl) {
			t.Fatalf("listing asked for at lookup %d", i)
		}
	}
	if !s.missed(7, ttl) {
		t.Fatalf("no listing at lookup %d", scanAfterMisses)
	}
	for i := 0; i < 2*scanAfterMisses; i++ {
		if s.missed(7, ttl) {
			t.Fatal("a second listing while the first is on its way")
		}
	}
	s.done(7, true)
	for i := 0; i < 4*scanAfterMisses; i++ {
		if s.missed(7, ttl) {
			t.Fatal("listed again right after a failed listing")
		}
	}
	s.dirs[7].failedUntil = time.Now().Add(-time.Second) // the wait has run out
	listed := false
	for i := 0; i < scanAfterMisses && !listed; i++ {
		listed = s.missed(7, ttl)
	}
	if !listed {
		t.Fatal("never listed again after the wait")
	}
}
