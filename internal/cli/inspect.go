// Inspecting: stat, blocks, fsstat, fsck (each with -json).

package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/plasmafs/plasma/client"
)

func cmdStat(ctx context.Context, args []string) error {
	f := newFlags("stat", "[-json] /path...", "Show inode attributes.", true)
	out := newPrinter(f, "one JSON object per path and line (as ls -json)")
	return withClient(ctx, f, args, 1, -1, func(c *client.Client) error {
		paths, err := expand(ctx, c, f.pos)
		if err != nil {
			return err
		}
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for _, p := range paths {
				fi, err := tx.Lstat(ctx, p)
				if err != nil {
					return err
				}
				if out.JSON() {
					if err := printJSON(out, []lsItem{{p, fi}}, "", false); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintf(stdout, "  path: %s\n inode: %d\n  type: %s\n  mode: %04o (%c%s)\n owner: %s\n group: %s\n  size: %d\n links: %d\n mtime: %s\n ctime: %s\n",
					escapeName(p), fi.Ino, fi.Type, client.UnixBits(fi.Mode), typeChar(fi.Type), modeString(fi.Mode), escapeName(fi.User), escapeName(fi.Group), fi.Size, fi.Nlink,
					fi.Mtime.Format(time.RFC3339Nano), fi.Ctime.Format(time.RFC3339Nano))
				if fi.Type == client.TypeFile {
					fmt.Fprintf(stdout, "   rep: %d\n   seq: %d\n", fi.Rep, fi.Seq)
				}
				if fi.Type == client.TypeSymlink {
					fmt.Fprintf(stdout, "target: %s\n", escapeName(fi.Target))
				}
			}
			return nil
		})
	})
}

func cmdBlocks(ctx context.Context, args []string) error {
	f := newFlags("blocks", "[-json] /path|glob...", "Show block lists: file block index range, then the datanode block range of each replica.", true)
	out := newPrinter(f, "one JSON object per file and line: path, ino, requested_replication, actual_replication,\nblocks (replicas counted) and extents [{index, count, replicas [{datanode, addr, start, alive}]}]")
	return withPaths(ctx, f, args, func(tx *client.Txn, paths []string) error {
		for i, p := range paths {
			fi, err := tx.Lookup(ctx, p)
			if err != nil {
				return err
			}
			if fi.Type != client.TypeFile {
				return fmt.Errorf("%s: not a regular file", p)
			}
			xs, err := tx.Blocks(ctx, fi.Ino)
			if err != nil {
				return err
			}
			blocks, actual := blockCounts(xs)
			v := jsonBlocks{Path: p, Ino: fi.Ino, Requested: fi.Rep, Actual: actual, Blocks: blocks, Extents: []jsonExtent{}}
			for _, x := range xs {
				e := jsonExtent{Index: x.Index, Count: x.Count, Replicas: []jsonReplica{}}
				for _, r := range x.Replicas {
					e.Replicas = append(e.Replicas, jsonReplica{Datanode: r.Datanode, Addr: r.Addr, Start: r.Start, Alive: r.Alive})
				}
				v.Extents = append(v.Extents, e)
			}
			err = out.item(v, func(w io.Writer) {
				if i > 0 {
					fmt.Fprintln(w)
				}
				if len(paths) > 1 {
					fmt.Fprintf(w, "%s:\n", escapeName(p))
				}
				fmt.Fprint(w, FormatBlocks(xs, fi.Rep))
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

type jsonBlocks struct {
	Path      string       `json:"path"`
	Ino       uint64       `json:"ino"`
	Requested int          `json:"requested_replication"`
	Actual    int          `json:"actual_replication"`
	Blocks    int          `json:"blocks"`
	Extents   []jsonExtent `json:"extents"`
}

type jsonExtent struct {
	Index    uint64        `json:"index"`
	Count    int           `json:"count"`
	Replicas []jsonReplica `json:"replicas"`
}

type jsonReplica struct {
	Datanode string `json:"datanode"`
	Addr     string `json:"addr"`
	Start    uint64 `json:"start"`
	Alive    bool   `json:"alive"`
}

// blockCounts returns the replicas' blocks of a block list and its actual
// replication (the fewest replicas of any extent).
func blockCounts(xs []client.Extent) (blocks, actual int) {
	actual = -1
	for _, x := range xs {
		blocks += x.Count * len(x.Replicas)
		if actual < 0 || len(x.Replicas) < actual {
			actual = len(x.Replicas)
		}
	}
	return blocks, max(actual, 0)
}

// FormatBlocks renders a block list as the original's "plasma blocks".
func FormatBlocks(xs []client.Extent, requested int) string {
	var b strings.Builder
	for _, x := range xs {
		fmt.Fprintf(&b, "%9d - %9d:", x.Index, x.Index+uint64(x.Count)-1)
		for _, r := range x.Replicas {
			fmt.Fprintf(&b, "[%d-%d]", r.Start, r.Start+uint64(x.Count)-1)
		}
		b.WriteByte('\n')
	}
	blocks, actual := blockCounts(xs)
	fmt.Fprintf(&b, "  blocks:                %d\n  actual replication:    %d\n  requested replication: %d\n", blocks, actual, requested)
	return b.String()
}

func cmdFsstat(ctx context.Context, args []string) error {
	f := newFlags("fsstat", "[-json]", "Show filesystem totals and datanodes.", true)
	out := newPrinter(f, "one JSON object: blocksize, total_blocks, used_blocks, free_blocks, files, directories,\nopen_transactions and datanodes [{id, identity, addr, alive, used_blocks, blocks}]")
	return withClient(ctx, f, args, 0, 0, func(c *client.Client) error {
		s, err := c.FsStat(ctx)
		if err != nil {
			return err
		}
		nodes, err := c.Datanodes(ctx)
		if err != nil {
			return err
		}
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
		v := jsonFsstat{Blocksize: s.Blocksize, Total: s.TotalBlocks, Used: s.UsedBlocks, Free: s.FreeBlocks, Files: s.Files, Dirs: s.Dirs,
			OpenTxns: s.OpenTxns, Datanodes: []jsonDatanode{}}
		for _, n := range nodes {
			v.Datanodes = append(v.Datanodes, jsonDatanode{ID: n.ID, Identity: n.Identity, Addr: n.Addr, Alive: n.Alive, Used: n.Used, Blocks: n.Blocks})
		}
		return out.item(v, func(w io.Writer) {
			bs := uint64(s.Blocksize)
			fmt.Fprintf(w, "blocksize:        %d\ntotal blocks:     %d (%s)\nused blocks:      %d (%s)\nfree blocks:      %d (%s)\nfiles:            %d\ndirectories:      %d\ndatanodes:        %d (%d alive)\nopen transactions: %d\n",
				s.Blocksize, s.TotalBlocks, human(s.TotalBlocks*bs), s.UsedBlocks, human(s.UsedBlocks*bs), s.FreeBlocks, human(s.FreeBlocks*bs),
				s.Files, s.Dirs, s.Datanodes, s.LiveDatanodes, s.OpenTxns)
			for _, n := range nodes {
				state := "alive"
				if !n.Alive {
					state = "DEAD"
				}
				fmt.Fprintf(w, "datanode %d %s %s %s used %d/%d blocks\n", n.ID, escapeName(n.Identity), escapeName(n.Addr), state, n.Used, n.Blocks)
			}
		})
	})
}

type jsonFsstat struct {
	Blocksize uint32         `json:"blocksize"`
	Total     uint64         `json:"total_blocks"`
	Used      uint64         `json:"used_blocks"`
	Free      uint64         `json:"free_blocks"`
	Files     uint64         `json:"files"`
	Dirs      uint64         `json:"directories"`
	OpenTxns  uint64         `json:"open_transactions"`
	Datanodes []jsonDatanode `json:"datanodes"`
}

type jsonDatanode struct {
	ID       uint32 `json:"id"`
	Identity string `json:"identity"`
	Addr     string `json:"addr"`
	Alive    bool   `json:"alive"`
	Used     uint64 `json:"used_blocks"`
	Blocks   uint64 `json:"blocks"`
}

func human(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

func cmdFsck(ctx context.Context, args []string) error {
	f := newFlags("fsck", "[-json] [-wait DURATION]", `Check metadata consistency and verify every block replica's checksum on its datanode.
A datanode that is not registered with the namenode (right after a namenode restart the
datanodes register again within seconds) is waited for, at most -wait; the replicas of one
that does not come back, or does not answer, are listed as not checked.
Exit status: 0 everything checked and sound, 1 problems found (damage, or the check
failed), 3 no problems found but some replicas could not be checked (run it again later).`, true)
	out := newPrinter(f, "one JSON object: files, blocks, unsettled, problems and unchecked (one string each)")
	wait := f.durationRange("wait", 30*time.Second, 0, time.Hour, "how long to wait for datanodes that are not registered")
	return withClient(ctx, f, args, 0, 0, func(c *client.Client) error {
		if err := awaitDatanodes(ctx, c, *wait); err != nil {
			return err
		}
		rep, err := c.Fsck(ctx)
		if err != nil {
			return err
		}
		// The re-replication queue: what is being repaired already.
		repl, rerr := c.ReplicationStatus(ctx)
		if rerr != nil {
			fmt.Fprintf(stderr, "plasma fsck: the replication queue could not be read: %v\n", rerr)
		}
		v := struct {
			Files       int                       `json:"files"`
			Blocks      int                       `json:"blocks"`
			Unsettled   int                       `json:"unsettled"`
			Problems    []string                  `json:"problems"`
			Unchecked   []string                  `json:"unchecked"`
			Replication *client.ReplicationStatus `json:"replication,omitempty"`
		}{rep.Files, rep.Blocks, rep.Unsettled, append([]string{}, rep.Problems...), append([]string{}, rep.Unchecked...), nil}
		var scrub map[uint32]client.ScrubProgress
		if rerr == nil {
			v.Replication = &repl
			scrub = scrubByNode(ctx, c, "fsck")
		}
		err = out.item(v, func(w io.Writer) {
			if rerr == nil {
				printReplication(w, repl)
				printScrub(w, scrub, repl.Nodes)
			}
			for _, p := range rep.Problems {
				fmt.Fprintln(w, escapeText(p))
			}
			for _, p := range rep.Unchecked {
				fmt.Fprintln(w, escapeText(p))
			}
			fmt.Fprintf(w, "fsck: %d files, %d blocks checked, %d problems", rep.Files, rep.Blocks, len(rep.Problems))
			if len(rep.Unchecked) > 0 {
				fmt.Fprintf(w, ", %d replica ranges not checked", len(rep.Unchecked))
			}
			fmt.Fprintln(w)
		})
		if err != nil {
			return err
		}
		switch {
		case len(rep.Problems) > 0:
			return fmt.Errorf("%d problems found", len(rep.Problems))
		case len(rep.Unchecked) > 0:
			fmt.Fprintf(stderr, "plasma fsck: no problems found, but %d replica ranges could not be checked (their datanodes are not registered or did not answer): run fsck again once they are back\n", len(rep.Unchecked))
			return exitStatus(exitUnchecked)
		}
		return nil
	})
}

// awaitDatanodes waits, at most limit, until every enabled datanode the
// namenode knows is registered (alive), saying on stderr which it waits
// for. It returns nil when the time is up: fsck then reports their
// replicas as not checked.
func awaitDatanodes(ctx context.Context, c *client.Client, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	said := false
	for {
		nodes, err := c.Datanodes(ctx)
		if err != nil {
			return err
		}
		// Not for a datanode the namenode declared dead whose replicas it
		// replaced: it holds nothing to check.
		empty := map[uint32]bool{}
		if st, err := c.ReplicationStatus(ctx); err == nil {
			for _, n := range st.Nodes {
				empty[n.ID] = n.State == "dead" && n.Replicas == 0
			}
		}
		var missing []string
		for _, n := range nodes {
			if n.Enabled && !n.Alive && !empty[n.ID] {
				missing = append(missing, escapeName(n.Identity))
			}
		}
		if len(missing) == 0 || !time.Now().Before(deadline) {
			return nil
		}
		if !said {
			fmt.Fprintf(stderr, "plasma fsck: waiting up to %v for %d datanodes to register with the namenode: %s\n", limit, len(missing), strings.Join(missing, " "))
			said = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
