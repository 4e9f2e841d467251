package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/mrexec"
)

// plasma mr convert: the original's plasma_convert.
func init() {
	register("mr convert", "[-rep N] [file::|plasma::]FROM [file::|plasma::]TO", "convert a file between record formats (text, .fixed<n>, .var) chosen by its name", cmdMRConvert)
}

func cmdMRConvert(ctx context.Context, args []string) error {
	f := newFlags("mr convert", "[-rep N] [file::|plasma::]FROM [file::|plasma::]TO", `Copy the records of FROM into the new file TO, converting between the MapReduce
record formats, each file's format chosen by its name as the original's auto format
did: a name ending in .var holds length-prefixed records (each a 4-byte big-endian
length, then the record), one ending in .fixed<n> records of n bytes each (e.g.
.fixed100), any other name text lines (a record is a line without its newline).
A record the target cannot hold (a line of the wrong length for .fixed<n>, a record
holding a newline for text) stops the conversion with its number; nothing is left
at TO. Paths are in PlasmaFS, or local with the prefix file::.`, true)
	rep := f.intRange("rep", 0, 0, client.MaxReplication, "replication of a PlasmaFS TO (0: cluster default)")
	return withClient(ctx, f, args, 2, 2, func(c *client.Client) error {
		trees, err := splitTreeArgs(f.pos)
		if err != nil {
			return err
		}
		from, to := trees[0], trees[1]
		inFmt, err := mrexec.FormatOfName(from.path)
		if err != nil {
			return usageError{err.Error()}
		}
		outFmt, err := mrexec.FormatOfName(to.path)
		if err != nil {
			return usageError{err.Error()}
		}
		src, closeSrc, err := openTree(ctx, c, from)
		if err != nil {
			return err
		}
		defer closeSrc()
		pr, pw := io.Pipe()
		var n int64
		go func() {
			var err error
			n, err = mrexec.Convert(src, inFmt, pw, outFmt)
			if err != nil {
				err = fmt.Errorf("%s: %w (%s not written)", f.pos[0], err, f.pos[1])
			}
			pw.CloseWithError(err)
		}()
		if to.local {
			err = copyLocal(ctx, pr, to.path)
		} else {
			// CopyIn commits only once it has read everything: a failed
			// conversion leaves no file.
			_, err = c.CopyIn(ctx, pr, to.path, client.CopyOptions{Rep: *rep})
		}
		pr.CloseWithError(err)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Converted: %s (%s) -> %s (%s), %d records\n", escapeName(f.pos[0]), inFmt, escapeName(f.pos[1]), outFmt, n)
		return nil
	})
}

// openTree opens a path argument for reading: a local file or a PlasmaFS
// file (in a read-only transaction that the returned function ends).
func openTree(ctx context.Context, c *client.Client, a treeArg) (io.Reader, func(), error) {
	if a.local {
		lf, err := os.Open(a.path)
		if err != nil {
			return nil, nil, err
		}
		return lf, func() { lf.Close() }, nil
	}
	tx := c.Begin()
	src, err := tx.Open(ctx, a.path)
	if err != nil {
		tx.Abort(ctx)
		return nil, nil, err
	}
	return src, func() { tx.Abort(ctx) }, nil
}
