// Listing: ls (text and -json).

package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/plasmafs/plasma/client"
)

func cmdLs(ctx context.Context, args []string) error {
	f := newFlags("ls", "[-l] [-h] [-R] [-i] [-a] [-d] [-1] [-json] [/path|glob...]", "List directories (default /).\nNames are printed with control characters, backslashes and bytes that are not\nUTF-8 escaped (\\n, \\x1b, \\\\, \\xff), one entry per line; -json has the exact names.\n-help (or --help) prints this help; -h is human-readable sizes.", true)
	var o lsOptions
	f.BoolVar(&o.long, "l", false, "long format")
	out := newPrinter(f, "one JSON object per entry and line, with all attributes and the exact names\n(a name that is not valid UTF-8 also as name_base64, path_base64, target_base64)")
	o.out = out
	f.BoolVar(&o.inum, "i", false, "show inode numbers")
	f.BoolVar(&o.all, "a", false, "include names starting with '.'")
	dirOnly := f.Bool("d", false, "list a directory itself, not its contents")
	f.BoolVar(&o.human, "h", false, "with -l: sizes in powers of 1024 (1.5K, 23M)")
	f.BoolVar(&o.recursive, "R", false, "list subdirectories recursively (symbolic links are not followed)")
	f.Bool("1", false, "one name per line (the default when not -l)")
	return withClient(ctx, f, expandShortFlags(args, "lidha1R"), 0, -1, func(c *client.Client) error {
		targets := f.pos
		if len(targets) == 0 {
			targets = []string{"/"}
		}
		targets, err := expand(ctx, c, targets)
		if err != nil {
			return err
		}
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			o.headers = len(targets) > 1 || o.recursive
			o.printed = false
			for _, t := range targets {
				fi, err := tx.Lstat(ctx, t)
				if err != nil {
					return err
				}
				if fi.Type == client.TypeSymlink && !o.long {
					if fi2, err := tx.Lookup(ctx, t); err == nil {
						fi = fi2
					}
				}
				if fi.IsDir() && !*dirOnly {
					if err := o.listDir(ctx, tx, t); err != nil {
						return err
					}
					continue
				}
				if err := o.print([]lsItem{{t, fi}}, t, false); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// lsOptions are what ls prints and how.
type lsOptions struct {
	long, inum, all, human, recursive bool
	out                               *printer
	headers                           bool // a "dir:" line before each directory's entries
	printed                           bool // something was printed already
}

// listDir lists directory dir, and with -R its subdirectories after it.
func (o *lsOptions) listDir(ctx context.Context, tx *client.Txn, dir string) error {
	ents, err := tx.ReadDir(ctx, dir)
	if err != nil {
		return err
	}
	var items []lsItem
	for _, e := range ents {
		if !o.all && strings.HasPrefix(e.Name, ".") {
			continue
		}
		efi, err := tx.Lstat(ctx, path.Join(dir, e.Name))
		if err != nil {
			if errors.Is(err, client.ErrNotFound) {
				continue
			}
			return err
		}
		items = append(items, lsItem{e.Name, efi})
	}
	if o.headers && !o.out.JSON() {
		if o.printed {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s:\n", escapeName(dir))
	}
	if err := o.print(items, dir, true); err != nil {
		return err
	}
	if !o.recursive {
		return nil
	}
	for _, it := range items {
		if it.fi.IsDir() {
			if err := o.listDir(ctx, tx, path.Join(dir, it.name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// print prints items, the entries of dir if listing.
func (o *lsOptions) print(items []lsItem, dir string, listing bool) error {
	o.printed = true
	if o.out.JSON() {
		return printJSON(o.out, items, dir, listing)
	}
	printLs(items, o.long, o.inum, o.human)
	return nil
}

type lsItem struct {
	name string
	fi   client.FileInfo
}

// printLs prints entries as ls does: names, or with long aligned columns.
func printLs(items []lsItem, long, inum, human bool) {
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
				sizeColumn(it.fi.Size, human), it.fi.Mtime.Format("2006-01-02 15:04"))
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
			case isNumber(c) || (human && isHumanSize(c)):
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

// sizeColumn renders a size for ls, du and df: bytes, or with human the
// way ls -h does (powers of 1024, one decimal below 10: 1.5K, 23M).
func sizeColumn(n int64, human bool) string {
	if !human {
		return strconv.FormatInt(n, 10)
	}
	return humanSize(n)
}

func humanSize(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	v, unit := float64(n), 0
	for v >= 1024 && unit < 6 {
		v /= 1024
		unit++
	}
	c := "KMGTPE"[unit-1]
	// Rounded up, as ls -h does: a size is never shown smaller than it is.
	if r := math.Ceil(v*10) / 10; r < 10 {
		return fmt.Sprintf("%.1f%c", r, c)
	}
	return fmt.Sprintf("%.0f%c", math.Ceil(v), c)
}

// isHumanSize reports whether s is a size as humanSize renders it.
func isHumanSize(s string) bool {
	if s == "" {
		return false
	}
	if last := s[len(s)-1]; strings.IndexByte("KMGTPE", last) >= 0 {
		s = s[:len(s)-1]
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}
