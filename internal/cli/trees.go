// Whole trees and the whole cluster: du, df, setrep.

package cli

import (
	"context"
	"fmt"
	"io"
	"path"
	"strconv"

	"github.com/plasmafs/plasma/client"
)

func init() {
	register("du", "[-s] [-h] [/path|glob...]", "show the sizes of directory trees", cmdDu)
	register("df", "[-h] [-json]", "show the cluster's capacity, used and free space", cmdDf)
	register("setrep", "[-R] N /path|glob...", "set the replication of files (existing blocks are copied or trimmed in the background)", cmdSetrep)
}

func cmdDu(ctx context.Context, args []string) error {
	f := newFlags("du", "[-s] [-h] [/path|glob...]", `Show the size of directory trees (default /): the bytes of the regular files in them,
their lengths (not blocks times replicas; a file with several links counted once). Without
-s, the total of every directory, each after the directories in it, as du prints them;
with -s, one total per argument. -help (or --help) prints this help.`, true)
	summary := f.Bool("s", false, "only the total of each argument")
	human := f.Bool("h", false, "sizes in powers of 1024 (1.5K, 23M)")
	return withClient(ctx, f, expandShortFlags(args, "sh"), 0, -1, func(c *client.Client) error {
		targets := f.pos
		if len(targets) == 0 {
			targets = []string{"/"}
		}
		targets, err := expand(ctx, c, targets)
		if err != nil {
			return err
		}
		tx := c.Begin()
		defer tx.Abort(ctx)
		line := func(size int64, p string) { fmt.Fprintf(stdout, "%s\t%s\n", sizeColumn(size, *human), escapeName(p)) }
		for _, t := range targets {
			fi, err := tx.Lstat(ctx, t)
			if err != nil {
				return err
			}
			each := line
			if *summary {
				each = nil
			}
			total, err := treeSize(ctx, tx, t, fi, map[uint64]bool{}, each)
			if err != nil {
				return err
			}
			if *summary || !fi.IsDir() {
				line(total, t)
			}
		}
		return nil
	})
}

// treeSize returns the bytes of the regular files under p (fi its
// attributes), each inode counted once (seen), calling each, if not nil,
// with every directory's total after those of the directories in it.
func treeSize(ctx context.Context, tx *client.Txn, p string, fi client.FileInfo, seen map[uint64]bool, each func(int64, string)) (int64, error) {
	switch {
	case fi.Type == client.TypeFile:
		if seen[fi.Ino] {
			return 0, nil
		}
		seen[fi.Ino] = true
		return fi.Size, nil
	case !fi.IsDir():
		return 0, nil
	}
	ents, err := tx.ReadDir(ctx, p)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, e := range ents {
		cp := path.Join(p, e.Name)
		cfi, err := tx.Lstat(ctx, cp)
		if err != nil {
			return 0, err
		}
		n, err := treeSize(ctx, tx, cp, cfi, seen, each)
		if err != nil {
			return 0, err
		}
		total += n
	}
	if each != nil {
		each(total, p)
	}
	return total, nil
}

func cmdDf(ctx context.Context, args []string) error {
	f := newFlags("df", "[-h] [-json]", `Show the cluster's capacity (the blocks of every datanode volume, dead ones included),
the space used and the space free, in bytes (with -h in powers of 1024). Used space counts
every replica. -help (or --help) prints this help.`, true)
	human := f.Bool("h", false, "sizes in powers of 1024 (1.5K, 23M)")
	out := newPrinter(f, "one JSON object: size, used, available (bytes), use_percent, datanodes, live_datanodes")
	return withClient(ctx, f, args, 0, 0, func(c *client.Client) error {
		s, err := c.FsStat(ctx)
		if err != nil {
			return err
		}
		bs := int64(s.Blocksize)
		size, used, free := int64(s.TotalBlocks)*bs, int64(s.UsedBlocks)*bs, int64(s.FreeBlocks)*bs
		pct := 0
		if size > 0 {
			pct = int((used*100 + size - 1) / size) // rounded up, as df does
		}
		v := struct {
			Size      int64 `json:"size"`
			Used      int64 `json:"used"`
			Available int64 `json:"available"`
			Percent   int   `json:"use_percent"`
			Datanodes int   `json:"datanodes"`
			Live      int   `json:"live_datanodes"`
		}{size, used, free, pct, int(s.Datanodes), int(s.LiveDatanodes)}
		return out.item(v, func(w io.Writer) {
			row := []string{"plasmafs", sizeColumn(size, *human), sizeColumn(used, *human), sizeColumn(free, *human), strconv.Itoa(pct) + "%",
				fmt.Sprintf("%d (%d alive)", s.Datanodes, s.LiveDatanodes)}
			head := []string{"Filesystem", "Size", "Used", "Avail", "Use%", "Datanodes"}
			for _, r := range [][]string{head, row} {
				fmt.Fprintf(w, "%-10s %12s %12s %12s %5s  %s\n", r[0], r[1], r[2], r[3], r[4], r[5])
			}
		})
	})
}

func cmdSetrep(ctx context.Context, args []string) error {
	f := newFlags("setrep", "[-R] N /path|glob...", `Set the replication of files to N (1..`+strconv.Itoa(client.MaxReplication)+`; at most the live datanodes), with -R
of every file under the directories named. Blocks written from now on get N replicas;
the namenode copies the blocks the files already have to more datanodes (a larger N)
or removes their extra replicas (a smaller N) in the background, at a bounded rate:
'plasma fsck' and 'plasma admin datanodes' show what is queued and being copied.`, true)
	recursive := f.Bool("R", false, "also the files under directories, recursively")
	return withClient(ctx, f, args, 2, -1, func(c *client.Client) error {
		n, err := strconv.Atoi(f.pos[0])
		if err != nil || n < 1 || n > client.MaxReplication {
			return usagef("replication %q: must be 1..%d", f.pos[0], client.MaxReplication)
		}
		paths, err := expand(ctx, c, f.pos[1:])
		if err != nil {
			return err
		}
		var set []string
		err = c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			set = set[:0]
			seen := map[uint64]bool{}
			for _, p := range paths {
				if err := setRepTree(ctx, tx, p, n, *recursive, seen, &set); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range set {
			fmt.Fprintf(stdout, "Replication %d set: %s\n", n, escapeName(p))
		}
		return nil
	})
}

// setRepTree sets the replication of the file p, or with recursive of the
// files under the directory p, each inode once (seen), adding the paths
// changed to set.
func setRepTree(ctx context.Context, tx *client.Txn, p string, n int, recursive bool, seen map[uint64]bool, set *[]string) error {
	fi, err := tx.Lstat(ctx, p)
	if err != nil {
		return err
	}
	switch {
	case fi.Type == client.TypeFile:
		if seen[fi.Ino] {
			return nil
		}
		seen[fi.Ino] = true
		if _, err := tx.SetAttr(ctx, fi.Ino, client.SetAttr{Rep: &n}); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		*set = append(*set, p)
		return nil
	case !fi.IsDir():
		return nil // symbolic links and special files have no blocks
	case !recursive:
		return fmt.Errorf("%s: is a directory (use -R for the files under it)", p)
	}
	ents, err := tx.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := setRepTree(ctx, tx, path.Join(p, e.Name), n, true, seen, set); err != nil {
			return err
		}
	}
	return nil
}
