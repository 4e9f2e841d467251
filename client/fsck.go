package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/plasmafs/plasma/internal/wire"
)

// FsckReport is the result of a filesystem check.
type FsckReport struct {
	Problems []string // one line each, naming the path
	Files    int
	Blocks   int
	// Unsettled counts inodes that changed during every pass of the
	// namenode's check (under heavy concurrent writes); they were not
	// checked. Run fsck again to check them.
	Unsettled int
	// Unchecked are the replicas the check could not ask about, one line
	// each naming the path, the blocks and the datanode: its datanode is
	// not registered with the namenode (down, or not yet back after a
	// namenode restart) or did not answer. They are not known to be
	// damaged; run fsck again once the datanode is back.
	Unchecked []string
}

// fsckVerifiers bounds the verify requests in flight at a time.
const fsckVerifiers = 4

// Fsck checks the metadata and every block replica's checksum on its
// datanode. The namenode checks its metadata in pages (it holds its lock
// for one page at a time) and sends every file's block list; the client
// verifies the blocks on the datanodes, at most wire.MaxVerify blocks per
// request, so neither the number of files nor the size of a file is
// limited.
func (c *Client) Fsck(ctx context.Context) (FsckReport, error) {
	// In a transaction, so the namenode hands out read tickets.
	tx := c.Begin()
	defer tx.Abort(ctx)
	var rep FsckReport
	token := uint64(0)
	for {
		r, err := tx.call(ctx, &wire.Request{Op: wire.OpFsck, Ino: token})
		if err != nil {
			return FsckReport{}, err
		}
		if len(r.Counters) < 4 {
			return FsckReport{}, fmt.Errorf("fsck: namenode answered without its scan state")
		}
		rep.Problems = append(rep.Problems, r.Problems...)
		rep.Files += int(r.Counters[2])
		rep.Unsettled = int(r.Counters[3])
		problems, unchecked, damaged := c.verifyFiles(ctx, r.Files, &rep.Blocks)
		c.reportDamaged(ctx, damaged)
		rep.Problems = append(rep.Problems, problems...)
		rep.Unchecked = append(rep.Unchecked, unchecked...)
		if r.Counters[1] != 0 {
			sort.Strings(rep.Problems)
			sort.Strings(rep.Unchecked)
			return rep, nil
		}
		token = r.Counters[0]
	}
}

// verifyFiles verifies every replica of the blocks listed and returns the
// problems found and the replicas it could not ask about, in the order of
// the list.
func (c *Client) verifyFiles(ctx context.Context, files []wire.FileBlocks, blocks *int) (problems, unchecked []string, damaged []wire.Extent) {
	var damagedMu sync.Mutex
	type task struct {
		path     string
		size     int64
		x        *wire.Extent
		replica  int
		from, to uint32 // blocks of the extent
	}
	var tasks []task
	for _, f := range files {
		for i := range f.Extents {
			x := &f.Extents[i]
			*blocks += int(x.Count)
			for ri := range x.Replicas {
				for from := uint32(0); from < x.Count; from += wire.MaxVerify {
					tasks = append(tasks, task{f.Path, f.Size, x, ri, from, min(x.Count, from+wire.MaxVerify)})
				}
			}
		}
	}
	out := make([][]string, len(tasks))
	notAsked := make([]string, len(tasks))
	sem := make(chan struct{}, fsckVerifiers)
	var wg sync.WaitGroup
	for i, t := range tasks {
		rp := t.x.Replicas[t.replica]
		n, ok := c.node(rp.Node)
		if !ok {
			continue // the namenode reports blocks on unknown datanodes
		}
		first, last := t.x.Index+uint64(t.from), t.x.Index+uint64(t.to)-1
		if !n.Alive || n.Addr == "" {
			notAsked[i] = fmt.Sprintf("%s: blocks %d-%d on datanode %s: not checked: the datanode is not registered with the namenode (down, or not back yet after a namenode restart)", t.path, first, last, n.Identity)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			x, start := t.x, rp.Start+uint64(t.from)
			bad, crcs, err := c.data.verify(ctx, n.Addr, start, uint64(t.to-t.from), ticketAt(x.Tickets, t.replica))
			var na noAnswerError
			if errors.As(err, &na) {
				notAsked[i] = fmt.Sprintf("%s: blocks %d-%d on datanode %s (%s): not checked: %v", t.path, first, last, n.Identity, n.Addr, na.err)
				return
			}
			if err != nil {
				out[i] = append(out[i], fmt.Sprintf("%s: blocks %d-%d on datanode %s (%s): %v", t.path, first, last, n.Identity, n.Addr, err))
				return
			}
			// The file's last block, partly filled, may hold more than its
			// committed bytes (an extension in place that was not
			// committed, or is being): only those bytes must match.
			tailOK := func(k uint64) bool {
				idx, bs := first+k, int64(n.Blocksize)
				valid := t.size - int64(idx)*bs
				if bs == 0 || valid <= 0 || valid >= bs {
					return false
				}
				buf := make([]byte, bs)
				return c.data.readBlock(ctx, 0, n.Addr, start+k, ticketAt(x.Tickets, t.replica), buf, x.CRC[int(t.from)+int(k)], int(valid)) == nil
			}
			for _, b := range bad {
				if !tailOK(b - start) {
					out[i] = append(out[i], fmt.Sprintf("%s: block %d: data does not match its checksum on datanode %s block %d", t.path, first+(b-start), n.Identity, b))
					damagedMu.Lock()
					damaged = append(damaged, wire.Extent{Index: first + (b - start), Count: 1, Replicas: []wire.Run{{Node: rp.Node, Start: b}},
						CRC: []uint32{x.CRC[int(t.from)+int(b-start)]}})
					damagedMu.Unlock()
				}
			}
			for k, crc := range crcs {
				if j := int(t.from) + k; j < len(x.CRC) && crc != x.CRC[j] && !tailOK(uint64(k)) {
					out[i] = append(out[i], fmt.Sprintf("%s: block %d: datanode %s block %d holds other data than was committed", t.path, first+uint64(k), n.Identity, start+uint64(k)))
				}
			}
		}()
	}
	wg.Wait()
	for i, p := range out {
		problems = append(problems, p...)
		if notAsked[i] != "" {
			unchecked = append(unchecked, notAsked[i])
		}
	}
	return problems, unchecked, damaged
}

// reportDamaged tells the namenode of the replicas found damaged, which it
// replaces from good ones (as the datanodes' scrubbers' reports). A
// failure is not fsck's: the problems are reported anyway.
func (c *Client) reportDamaged(ctx context.Context, damaged []wire.Extent) {
	for len(damaged) > 0 {
		k := min(len(damaged), 1024)
		c.call(ctx, &wire.Request{Op: wire.OpNodeAdmin, Path: "damaged", Extents: damaged[:k]})
		damaged = damaged[k:]
	}
}
