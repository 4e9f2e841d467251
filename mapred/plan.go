package mapred

import (
	"context"
	"sort"
	"strings"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/mrexec"
)

// inputSplit is one map task's input: bytes [Start, End) of a file, made of
// contiguous blocks that all have a replica on datanode Node ("" if the
// blocks have no replica in common, e.g. holes).
type inputSplit struct {
	File       string
	Start, End int64
	Node       string
}

// planSplits lists the regular files of dir (names starting with '.' or
// '_' are skipped, as Hadoop does) and cuts them into splits of at most
// splitSize bytes (rounded down to whole blocks, at least one block), each
// a run of blocks sharing a datanode.
//
// A file of a format that cannot be cut anywhere but at its start
// (whole reports it, given its path) is one split, placed on the datanode
// holding most of it.
func planSplits(ctx context.Context, tx *client.Txn, dir string, splitSize int64, whole func(path string) bool) ([]inputSplit, int64, error) {
	ents, err := tx.ReadDirPlus(ctx, dir)
	if err != nil {
		return nil, 0, err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
	var out []inputSplit
	var bs int64
	load := map[string]int{} // splits assigned per datanode, to spread ties
	for _, e := range ents {
		if e.Type != client.TypeFile || strings.HasPrefix(e.Name, ".") || strings.HasPrefix(e.Name, "_") || e.Info.Size == 0 {
			continue
		}
		fbs := int64(e.Info.Blocksize)
		if fbs <= 0 {
			fbs = 1 << 20
		}
		bs = fbs
		xs, err := tx.Blocks(ctx, e.Ino)
		if err != nil {
			return nil, 0, err
		}
		path := strings.TrimSuffix(dir, "/") + "/" + e.Name
		if whole(path) {
			out = append(out, wholeFile(path, e.Info.Size, fbs, xs, load))
			continue
		}
		out = append(out, splitFile(path, e.Info.Size, fbs, splitSize, xs, load)...)
	}
	return out, bs, nil
}

// splitFile cuts one file: blocks are added to the current split while
// some datanode holds all of them and the split is below splitSize.
func splitFile(path string, size, bs, splitSize int64, xs []client.Extent, load map[string]int) []inputSplit {
	perSplit := max(1, splitSize/bs)
	nblocks := (size + bs - 1) / bs
	holders := make([][]string, nblocks) // datanodes of each block (nil: a hole)
	for _, x := range xs {
		var ids []string
		for _, r := range x.Replicas {
			if r.Alive {
				ids = append(ids, r.Datanode)
			}
		}
		for i := x.Index; i < x.Index+uint64(x.Count) && int64(i) < nblocks; i++ {
			holders[i] = ids
		}
	}
	var out []inputSplit
	var cur []string // candidate datanodes of the current split; nil: any
	start := int64(0)
	finish := func(endBlock int64) {
		s := inputSplit{File: path, Start: start * bs, End: min(endBlock*bs, size)}
		best := ""
		for _, id := range cur {
			if best == "" || load[id] < load[best] {
				best = id
			}
		}
		if best != "" {
			load[best]++
		}
		s.Node = best
		out = append(out, s)
		start, cur = endBlock, nil
	}
	for b := int64(0); b < nblocks; b++ {
		h := holders[b]
		if b > start {
			next := cur
			if h != nil {
				next = intersect(cur, h)
			}
			if b-start >= perSplit || (cur != nil && h != nil && len(next) == 0) {
				finish(b)
				cur = h
				continue
			}
			cur = next
			continue
		}
		cur = h
	}
	if start < nblocks {
		finish(nblocks)
	}
	return out
}

// wholeFile is one split of a whole file, on the datanode holding the
// most of its blocks.
func wholeFile(path string, size, bs int64, xs []client.Extent, load map[string]int) inputSplit {
	held := map[string]int64{}
	for _, x := range xs {
		for _, r := range x.Replicas {
			if r.Alive {
				held[r.Datanode] += int64(x.Count)
			}
		}
	}
	best := ""
	for id, n := range held {
		if best == "" || n > held[best] || n == held[best] && id < best {
			best = id
		}
	}
	if best != "" {
		load[best]++
	}
	return inputSplit{File: path, Start: 0, End: size, Node: best}
}

func intersect(a, b []string) []string {
	if a == nil {
		return b
	}
	var out []string
	for _, x := range a {
		for _, y := range b {
			if x == y {
				out = append(out, x)
				break
			}
		}
	}
	return out
}

// splitFormat is the record format of input file name in job j: the
// job's, or under input format "auto" the one the name's suffix names.
func splitFormat(j Job, name string) (mrexec.RecordFormat, error) {
	if j.InputFormat == mrexec.FormatAuto {
		return mrexec.FormatOfName(name)
	}
	return mrexec.RecordFormat{Kind: j.InputFormat, Size: j.RecordSize}, nil
}
