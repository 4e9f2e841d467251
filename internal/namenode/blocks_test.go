package namenode

import (
	"reflect"
	"testing"

	"github.com/plasmafs/plasma/internal/wire"
)

func ext(index uint64, count uint32, node uint32, start uint64, crc0 uint32) wire.Extent {
	x := wire.Extent{Index: index, Count: count, Replicas: []wire.Run{{Node: node, Start: start}}}
	for i := uint32(0); i < count; i++ {
		x.CRC = append(x.CRC, crc0+i)
	}
	return x
}

func TestMergeBlocksAppendsContiguously(t *testing.T) {
	got, freed := mergeBlocks([]wire.Extent{ext(0, 4, 1, 100, 0)}, []wire.Extent{ext(4, 2, 1, 104, 4)})
	if len(freed) != 0 {
		t.Fatalf("append freed %v", freed)
	}
	want := []wire.Extent{ext(0, 6, 1, 100, 0)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want one merged extent %+v", got, want)
	}
	// Not contiguous on the datanode: a new extent.
	got, _ = mergeBlocks(want, []wire.Extent{ext(6, 1, 1, 300, 6)})
	if len(got) != 2 || got[1].Replicas[0].Start != 300 {
		t.Fatalf("got %+v", got)
	}
}

func TestMergeBlocksReplacesAndFrees(t *testing.T) {
	old := []wire.Extent{ext(0, 4, 1, 100, 0)}
	got, freed := mergeBlocks(old, []wire.Extent{ext(1, 2, 2, 50, 90)})
	want := []wire.Extent{ext(0, 1, 1, 100, 0), ext(1, 2, 2, 50, 90), ext(3, 1, 1, 103, 3)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	wantFreed := []run{{node: 1, start: 101, count: 1}, {node: 1, start: 102, count: 1}}
	if !reflect.DeepEqual(freed, wantFreed) {
		t.Fatalf("freed %+v, want %+v", freed, wantFreed)
	}
	// The old list is not modified (a reader may still hold it).
	if !reflect.DeepEqual(old, []wire.Extent{ext(0, 4, 1, 100, 0)}) {
		t.Fatalf("old list changed: %+v", old)
	}
}

func TestExtentRuns(t *testing.T) {
	x := ext(0, 3, 1, 10, 0)
	x.Replicas = append(x.Replicas, wire.Run{Node: 2, Start: 20})
	got := extentRuns([]wire.Extent{x})
	want := []run{{node: 1, start: 10, count: 3}, {node: 2, start: 20, count: 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v", got)
	}
}
