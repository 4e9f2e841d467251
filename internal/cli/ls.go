// Listing: ls (text and -json).

package cli

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/plasmafs/plasma/client"
)

func cmdLs(ctx context.Context, args []string) error {
	f := newFlags("ls", "[-l] [-i] [-a] [-d] [-1] [-json] [/path|glob...]", "List directories (default /).\nNames are printed with control characters, backslashes and bytes that are not\nUTF-8 escaped (\\n, \\x1b, \\\\, \\xff), one entry per line; -json has the exact names.", true)
	long := f.Bool("l", false, "long format")
	out := newPrinter(f, "one JSON object per entry and line, with all attributes and the exact names\n(a name that is not valid UTF-8 also as name_base64, path_base64, target_base64)")
	asJSON := out.json
	inum := f.Bool("i", false, "show inode numbers")
	all := f.Bool("a", false, "include names starting with '.'")
	dirOnly := f.Bool("d", false, "list a directory itself, not its contents")
	f.Bool("1", false, "one name per line (the default when not -l)")
	return withClient(ctx, f, expandShortFlags(args, "lida1"), 0, -1, func(c *client.Client) error {
		targets := f.pos
		if len(targets) == 0 {
			targets = []string{"/"}
		}
		targets, err := expand(ctx, c, targets)
		if err != nil {
			return err
		}
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for ti, t := range targets {
				fi, err := tx.Lstat(ctx, t)
				if err != nil {
					return err
				}
				if fi.Type == client.TypeSymlink && !*long {
					if fi2, err := tx.Lookup(ctx, t); err == nil {
						fi = fi2
					}
				}
				var items []lsItem
				if fi.IsDir() && !*dirOnly {
					ents, err := tx.ReadDir(ctx, t)
					if err != nil {
						return err
					}
					for _, e := range ents {
						if !*all && strings.HasPrefix(e.Name, ".") {
							continue
						}
						efi, err := tx.Lstat(ctx, path.Join(t, e.Name))
						if err != nil {
							if errors.Is(err, client.ErrNotFound) {
								continue
							}
							return err
						}
						items = append(items, lsItem{e.Name, efi})
					}
					if len(targets) > 1 && !*asJSON {
						if ti > 0 {
							fmt.Fprintln(stdout)
						}
						fmt.Fprintf(stdout, "%s:\n", escapeName(t))
					}
				} else {
					items = append(items, lsItem{t, fi})
				}
				if *asJSON {
					if err := printJSON(out, items, t, fi.IsDir() && !*dirOnly); err != nil {
						return err
					}
					continue
				}
				printLs(items, *long, *inum)
			}
			return nil
		})
	})
}

type lsItem struct {
	name string
	fi   client.FileInfo
}

// printLs prints entries as ls does: names, or with long aligned columns.
func printLs(items []lsItem, long, inum bool) {
	rows := make([][]string, len(items))
	for i, it := range items {
		var r []string
		if inum {
			r = append(r, strconv.FormatUint(it.fi.Ino, 10))
		}
		name := escapeName(it.name)
		if long {
			if it.fi.Type == client.TypeSymlink {
				name += " -> " + escapeName(it.fi.Target)
			}
			r = append(r, string(typeChar(it.fi.Type))+modeString(it.fi.Mode), strconv.Itoa(int(it.fi.Nlink)), escapeName(it.fi.User), escapeName(it.fi.Group),
				strconv.FormatInt(it.fi.Size, 10), it.fi.Mtime.Format("2006-01-02 15:04"))
		}
		rows[i] = append(r, name)
	}
	var width []int
	for _, r := range rows {
		for j, c := range r {
			if j >= len(width) {
				width = append(width, 0)
			}
			width[j] = max(width[j], len(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for j, c := range r {
			switch {
			case j == len(r)-1:
				b.WriteString(c)
			case isNumber(c):
				fmt.Fprintf(&b, "%*s ", width[j], c)
			default:
				fmt.Fprintf(&b, "%-*s ", width[j], c)
			}
		}
		fmt.Fprintln(stdout, b.String())
	}
}

// jsonEntry is one line of ls -json and stat -json. Strings are the exact
// names when they are valid UTF-8 (JSON cannot carry other bytes); for a
// name that is not, the exact bytes are in the _base64 field beside it.
type jsonEntry struct {
	Path         string `json:"path"`
	PathBase64   []byte `json:"path_base64,omitempty"`
	Name         string `json:"name"`
	NameBase64   []byte `json:"name_base64,omitempty"`
	Ino          uint64 `json:"ino"`
	Type         string `json:"type"`
	Mode         string `json:"mode"`
	Nlink        uint32 `json:"nlink"`
	User         string `json:"user"`
	Group        string `json:"group"`
	Size         int64  `json:"size"`
	Mtime        string `json:"mtime"`
	Ctime        string `json:"ctime"`
	Rep          int    `json:"rep,omitempty"`
	Seq          uint64 `json:"seq,omitempty"`
	Target       string `json:"target,omitempty"`
	TargetBase64 []byte `json:"target_base64,omitempty"`
	Rdev         uint64 `json:"rdev,omitempty"` // device nodes
}

// exactBytes returns s's bytes when JSON cannot carry s as it is.
func exactBytes(s string) []byte {
	if utf8.ValidString(s) {
		return nil
	}
	return []byte(s)
}

func newJSONEntry(p string, fi client.FileInfo) jsonEntry {
	name := path.Base(p)
	e := jsonEntry{Path: p, PathBase64: exactBytes(p), Name: name, NameBase64: exactBytes(name), Ino: fi.Ino, Type: fi.Type.String(),
		Mode: fmt.Sprintf("%04o", client.UnixBits(fi.Mode)), Nlink: fi.Nlink, User: fi.User, Group: fi.Group, Size: fi.Size,
		Mtime: fi.Mtime.UTC().Format(time.RFC3339Nano), Ctime: fi.Ctime.UTC().Format(time.RFC3339Nano)}
	if fi.Type == client.TypeFile {
		e.Rep, e.Seq = fi.Rep, fi.Seq
	}
	if fi.Type == client.TypeSymlink {
		e.Target, e.TargetBase64 = fi.Target, exactBytes(fi.Target)
	}
	e.Rdev = fi.Rdev
	return e
}

// printJSON prints items as JSON lines; in a listing of directory dir
// their names are entries of dir.
func printJSON(out *printer, items []lsItem, dir string, listing bool) error {
	for _, it := range items {
		p := it.name
		if listing {
			p = path.Join(dir, it.name)
		}
		e := newJSONEntry(p, it.fi)
		if listing {
			e.Name, e.NameBase64 = it.name, exactBytes(it.name)
		}
		if err := out.item(e, nil); err != nil {
			return err
		}
	}
	return nil
}
