package namenode

import (
	"reflect"
	"testing"

	"github.com/plasmafs/plasma/internal/wire"
)

// TestStrikeRunsSplitsExtent: striking one block's replica out of a
// three-block extent leaves the other blocks' replicas, and a block whose
// every replica failed is reported, with nothing struck.
func TestStrikeRunsSplitsExtent(t *testing.T) {
	xs := []wire.Extent{{Index: 0, Count: 3, CRC: []uint32{10, 11, 12}, Gen: 1,
		Replicas: []wire.Run{{Node: 1, Start: 100}, {Node: 2, Start: 200}}}}
	failed := dataSyncFailure{1: nil}
	out, struck, orphans := strikeRuns(xs, []unsyncedBlock{{ino: 7, index: 1, node: 1, slot: 101}}, failed)
	if len(orphans) > 0 {
		t.Fatalf("orphans %v", orphans)
	}
	want := []wire.Extent{
		{Index: 0, Count: 1, CRC: []uint32{10}, Gen: 1, Replicas: []wire.Run{{Node: 1, Start: 100}, {Node: 2, Start: 200}}},
		{Index: 1, Count: 1, CRC: []uint32{11}, Gen: 1, Replicas: []wire.Run{{Node: 2, Start: 201}}},
		{Index: 2, Count: 1, CRC: []uint32{12}, Gen: 1, Replicas: []wire.Run{{Node: 1, Start: 102}, {Node: 2, Start: 202}}},
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("struck list\n got %+v\nwant %+v", out, want)
	}
	if !reflect.DeepEqual(struck, map[wire.Run]uint32{{Node: 1, Start: 101}: 11}) {
		t.Fatalf("struck %v", struck)
	}
	// A block listed at another index is another version: not struck.
	if _, struck, _ := strikeRuns(xs, []unsyncedBlock{{ino: 7, index: 2, node: 1, slot: 101}}, failed); len(struck) != 0 {
		t.Fatalf("struck a replica at another index: %v", struck)
	}
	failed[2] = nil
	out, struck, orphans = strikeRuns(xs, []unsyncedBlock{{ino: 7, index: 1, node: 1, slot: 101}, {ino: 7, index: 1, node: 2, slot: 201}}, failed)
	if len(orphans) != 1 || orphans[0].index != 1 || struck != nil || !reflect.DeepEqual(out, xs) {
		t.Fatalf("every replica failed: orphans %v struck %v list %+v", orphans, struck, out)
	}
}
