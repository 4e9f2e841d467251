package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/wire"
)

func init() {
	register("put", "[-rep N] [-commit-every BYTES] LOCALFILE|-stdin /path", "copy a local file (or stdin) into PlasmaFS", cmdPut)
	register("get", "/path LOCALFILE", "copy a PlasmaFS file to a local file", cmdGet)
	register("cat", "/path...", "write PlasmaFS files to stdout", cmdCat)
	register("ls", "[-l] [-i] [-a] [-d] [-1] [-json] [/path|glob...]", "list directories", cmdLs)
	register("mkdir", "[-p] [-mode MODE] /dir...", "create directories", cmdMkdir)
	register("create", "[-rep N] /path...", "create new empty files", cmdCreate)
	register("rm", "[-r] /path|glob...", "remove files (and with -r, directory trees)", cmdRm)
	register("mv", "/from /to", "rename or move", cmdMv)
	register("ln", "[-s] TARGET /linkpath", "make a hard (or with -s, symbolic) link", cmdLn)
	register("cp", "[-rep N] /from /to", "copy a file within PlasmaFS", cmdCp)
	register("chmod", "MODE /path...", "change permission bits (octal)", cmdChmod)
	register("chown", "USER[:GROUP] /path...", "change owner and group", cmdChown)
	register("stat", "[-json] /path...", "show inode attributes", cmdStat)
	register("blocks", "/path|glob...", "show block lists (file index range: datanode block ranges)", cmdBlocks)
	register("fsstat", "", "show filesystem totals and datanodes", cmdFsstat)
	register("fsck", "", "check metadata and every block replica; exit 1 on problems", cmdFsck)
}

func needArgs(f *flags, min, max int) error {
	if len(f.pos) < min || (max >= 0 && len(f.pos) > max) {
		return usagef("wrong number of arguments")
	}
	return nil
}

// withClient parses the flags, connects and runs fn.
func withClient(ctx context.Context, f *flags, args []string, min, max int, fn func(c *client.Client) error) error {
	if err := f.parse(args); err != nil {
		return err
	}
	if err := needArgs(f, min, max); err != nil {
		return err
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// expand expands globs on the PlasmaFS side; a pattern matching nothing is
// an error naming it.
func expand(ctx context.Context, c *client.Client, args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		// Not a pattern, or not a well-formed one (such as a name with an
		// escape sequence "\x1b[31m" in it): the path itself.
		if _, err := path.Match(a, ""); !strings.ContainsAny(a, "*?[") || err != nil {
			out = append(out, a)
			continue
		}
		var m []string
		err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			var err error
			m, err = tx.Glob(ctx, a)
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: no match", a)
		}
		out = append(out, m...)
	}
	return out, nil
}

func cmdPut(ctx context.Context, args []string) error {
	f := newFlags("put", "[-rep N] LOCALFILE|-stdin /path", "Copy a local file into PlasmaFS. The file must not exist yet.\nLong copies commit every -commit-every bytes, so no transaction grows without bound.", true)
	rep := f.intRange("rep", 0, 0, wire.MaxReplica, "replication (0: cluster default)")
	useStdin := f.Bool("stdin", false, "read the data from standard input")
	var every int64 = 1 << 30
	f.sizeRange(&every, "commit-every", 1<<20, 1<<50, "commit after this many bytes")
	var quiet bool
	f.BoolVar(&quiet, "q", false, "no progress bar")
	if err := f.parse(args); err != nil {
		return err
	}
	want := 2
	if *useStdin {
		want = 1
	}
	if len(f.pos) != want {
		return usagef("wrong number of arguments")
	}
	dst := f.pos[want-1]
	var src io.Reader
	var size int64 = -1
	name := "stdin"
	if !*useStdin {
		name = f.pos[0]
		lf, err := os.Open(name)
		if err != nil {
			return err
		}
		defer lf.Close()
		st, err := lf.Stat()
		if err != nil {
			return err
		}
		if st.IsDir() {
			return fmt.Errorf("%s: is a directory", name)
		}
		size = st.Size()
		src = lf
	} else {
		src = os.Stdin
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	bar := newProgress(size, "put", quiet)
	n, err := c.CopyIn(ctx, io.TeeReader(src, bar), dst, client.CopyOptions{Rep: *rep, CommitEvery: every})
	bar.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Copied: %s -> %s (%d bytes)\n", escapeName(name), escapeName(dst), n)
	return nil
}

func cmdGet(ctx context.Context, args []string) error {
	f := newFlags("get", "/path LOCALFILE", "Copy a PlasmaFS file to a local file ('-' for stdout).\nThe file is written under a temporary name beside LOCALFILE and renamed when it is\ncomplete: a failed or interrupted get leaves no partial file (and an existing\nLOCALFILE as it was).", true)
	var quiet bool
	f.BoolVar(&quiet, "q", false, "no progress bar")
	return withClient(ctx, f, args, 2, 2, func(c *client.Client) error {
		// A read-only transaction: nothing to commit, so no retries.
		tx, _ := c.Begin(ctx)
		defer tx.Abort(ctx)
		src, err := tx.Open(ctx, f.pos[0])
		if err != nil {
			return err
		}
		if f.pos[1] == "-" {
			bar := newProgress(src.Size(), "get", quiet)
			_, err = src.WriteTo(io.MultiWriter(stdout, bar))
			bar.finish()
			return err
		}
		return getToFile(ctx, src, f.pos[1], quiet)
	})
}

// getToFile copies src to the local file dst atomically: into a new
// temporary file in dst's directory, synced, then renamed over dst. On an
// error, or when ctx ends (Ctrl-C), the temporary file is removed and dst
// is left as it was.
func getToFile(ctx context.Context, src *client.File, dst string, quiet bool) error {
	// Write through a symbolic link to where it points, as os.Create would.
	target := dst
	if fi, err := os.Lstat(dst); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if t, err := filepath.EvalSymlinks(dst); err == nil {
			target = t
		}
	}
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: is a directory", dst)
	}
	tmp, err := createTemp(target)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bar := newProgress(src.Size(), "get", quiet)
	copied := make(chan error, 1)
	go func() {
		_, err := src.WriteTo(io.MultiWriter(tmp, bar))
		if err == nil {
			err = tmp.Sync()
		}
		copied <- err
	}()
	select {
	case err = <-copied:
	case <-ctx.Done():
		// Interrupted: do not wait for a read that may be stuck on an
		// unresponsive datanode; the deferred cleanup removes the
		// temporary file (later writes to it fail: it is closed).
		bar.finish()
		return fmt.Errorf("%s: interrupted, nothing written: %w", dst, context.Cause(ctx))
	}
	bar.finish()
	if err != nil {
		return fmt.Errorf("%w (%s not written)", err, dst)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return err
	}
	done = true
	// Make the rename itself durable.
	if d, err := os.Open(filepath.Dir(target)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// createTemp creates a new, hidden file beside dst, with the permissions
// os.Create would give dst (0666 less the umask).
func createTemp(dst string) (*os.File, error) {
	dir, base := filepath.Split(dst)
	var err error
	for i := 0; i < 100; i++ {
		name := filepath.Join(dir, fmt.Sprintf(".%s.plasma-get-%d", base, rand.Uint32()))
		var tf *os.File
		tf, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			return tf, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	return nil, err
}

// withPaths connects, expands the path arguments and runs fn in one
// read-only transaction.
func withPaths(ctx context.Context, f *flags, args []string, fn func(tx *client.Txn, paths []string) error) error {
	return withClient(ctx, f, args, 1, -1, func(c *client.Client) error {
		paths, err := expand(ctx, c, f.pos)
		if err != nil {
			return err
		}
		tx, _ := c.Begin(ctx)
		defer tx.Abort(ctx)
		return fn(tx, paths)
	})
}

func cmdCat(ctx context.Context, args []string) error {
	f := newFlags("cat", "/path...", "Write PlasmaFS files to standard output.", true)
	return withPaths(ctx, f, args, func(tx *client.Txn, paths []string) error {
		for _, p := range paths {
			src, err := tx.Open(ctx, p)
			if err != nil {
				return err
			}
			if _, err := src.WriteTo(stdout); err != nil {
				return err
			}
		}
		return nil
	})
}

// escapeName renders a name (file name, path, symlink target, user) for a
// terminal or a line-oriented reader: backslash, control characters,
// other non-printable characters and invalid UTF-8 are escaped (\\, \n,
// \t, \x1b, \u200e, \xff for a byte that is not UTF-8), so one name is
// always one line and no name can send control sequences to a terminal.
// The exact bytes are in the -json output.
func escapeName(s string) string { return escape(s, true) }

// escapeText is escapeName for messages (errors, fsck problems): the same,
// except that backslashes are left as they are.
func escapeText(s string) string { return escape(s, false) }

func escape(s string, backslash bool) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || (c == '\\' && backslash) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\' && backslash:
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[i : i+n])
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += n
	}
	return b.String()
}

func typeChar(t client.FileType) byte {
	switch t {
	case client.TypeDir:
		return 'd'
	case client.TypeSymlink:
		return 'l'
	case client.TypeFIFO:
		return 'p'
	case client.TypeSocket:
		return 's'
	case client.TypeCharDevice:
		return 'c'
	case client.TypeBlockDevice:
		return 'b'
	}
	return '-'
}

func cmdLs(ctx context.Context, args []string) error {
	f := newFlags("ls", "[-l] [-i] [-a] [-d] [-1] [-json] [/path|glob...]", "List directories (default /).\nNames are printed with control characters, backslashes and bytes that are not\nUTF-8 escaped (\\n, \\x1b, \\\\, \\xff), one entry per line; -json has the exact names.", true)
	long := f.Bool("l", false, "long format")
	asJSON := f.Bool("json", false, "one JSON object per entry and line, with all attributes and the exact names\n(a name that is not valid UTF-8 also as name_base64, path_base64, target_base64)")
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
					if err := printJSON(items, t, fi.IsDir() && !*dirOnly); err != nil {
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
	return e
}

// printJSON prints items as JSON lines; in a listing of directory dir
// their names are entries of dir.
func printJSON(items []lsItem, dir string, listing bool) error {
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	for _, it := range items {
		p := it.name
		if listing {
			p = path.Join(dir, it.name)
		}
		e := newJSONEntry(p, it.fi)
		if listing {
			e.Name, e.NameBase64 = it.name, exactBytes(it.name)
		}
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}

func isNumber(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// expandShortFlags turns "-li" into "-l -i" for the single-letter options
// in letters, as ls users expect.
func expandShortFlags(args []string, letters string) []string {
	var out []string
	for _, a := range args {
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && strings.Trim(a[1:], letters) == "" {
			for _, c := range a[1:] {
				out = append(out, "-"+string(c))
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

func modeString(m fs.FileMode) string {
	const rwx = "rwxrwxrwx"
	b := []byte("---------")
	for i := 0; i < 9; i++ {
		if m&(1<<uint(8-i)) != 0 {
			b[i] = rwx[i]
		}
	}
	// setuid, setgid and sticky replace the execute bits as ls shows them
	special := func(i int, on bool, c byte) {
		if !on {
			return
		}
		if b[i] == 'x' {
			b[i] = c
		} else {
			b[i] = c - 'a' + 'A'
		}
	}
	special(2, m&fs.ModeSetuid != 0, 's')
	special(5, m&fs.ModeSetgid != 0, 's')
	special(8, m&fs.ModeSticky != 0, 't')
	return string(b)
}

func cmdMkdir(ctx context.Context, args []string) error {
	f := newFlags("mkdir", "[-p] /dir...", "Create directories.", true)
	parents := f.Bool("p", false, "create missing parents; no error if the directory exists")
	mode := f.String("mode", "755", "permission bits (octal)")
	return withClient(ctx, f, args, 1, -1, func(c *client.Client) error {
		m, err := strconv.ParseUint(*mode, 8, 32)
		if err != nil || m > 0o7777 {
			return usagef("bad mode %q", *mode)
		}
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for _, p := range f.pos {
				var err error
				if *parents {
					_, err = tx.MkdirAll(ctx, p, client.UnixMode(uint32(m)))
				} else {
					_, err = tx.Mkdir(ctx, p, client.UnixMode(uint32(m)))
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func cmdCreate(ctx context.Context, args []string) error {
	f := newFlags("create", "[-rep N] /path...", "Create new, empty files (they must not exist).", true)
	rep := f.intRange("rep", 0, 0, wire.MaxReplica, "replication (0: cluster default)")
	return withClient(ctx, f, args, 1, -1, func(c *client.Client) error {
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for _, p := range f.pos {
				if _, err := tx.Create(ctx, p, client.CreateOptions{Rep: *rep}); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func cmdRm(ctx context.Context, args []string) error {
	f := newFlags("rm", "[-r] /path|glob...", "Remove files; with -r, directories and their contents.", true)
	recursive := f.Bool("r", false, "remove directories recursively")
	return withClient(ctx, f, args, 1, -1, func(c *client.Client) error {
		paths, err := expand(ctx, c, f.pos)
		if err != nil {
			return err
		}
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for _, p := range paths {
				if err := removePath(ctx, tx, p, *recursive); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func removePath(ctx context.Context, tx *client.Txn, p string, recursive bool) error {
	fi, err := tx.Lstat(ctx, p)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return tx.Unlink(ctx, p)
	}
	if !recursive {
		return fmt.Errorf("%s: is a directory (use rm -r)", p)
	}
	ents, err := tx.ReadDir(ctx, p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := removePath(ctx, tx, path.Join(p, e.Name), true); err != nil {
			return err
		}
	}
	return tx.Rmdir(ctx, p)
}

func cmdMv(ctx context.Context, args []string) error {
	f := newFlags("mv", "/from /to", "Rename or move a file or directory. If /to is a directory, move into it.", true)
	return withClient(ctx, f, args, 2, 2, func(c *client.Client) error {
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			to := f.pos[1]
			if fi, err := tx.Lookup(ctx, to); err == nil && fi.IsDir() {
				to = path.Join(to, path.Base(f.pos[0]))
			}
			return tx.Rename(ctx, f.pos[0], to)
		})
	})
}

func cmdLn(ctx context.Context, args []string) error {
	f := newFlags("ln", "[-s] TARGET /linkpath", "Make a hard link, or with -s a symbolic link.", true)
	sym := f.Bool("s", false, "symbolic link")
	return withClient(ctx, f, args, 2, 2, func(c *client.Client) error {
		return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			if *sym {
				_, err := tx.Symlink(ctx, f.pos[0], f.pos[1])
				return err
			}
			return tx.Link(ctx, f.pos[0], f.pos[1])
		})
	})
}

func cmdCp(ctx context.Context, args []string) error {
	f := newFlags("cp", "[-rep N] /from /to", "Copy a file within PlasmaFS (the copy is new; /to must not exist).", true)
	rep := f.intRange("rep", 0, 0, wire.MaxReplica, "replication of the copy (0: same as the source)")
	var quiet bool
	f.BoolVar(&quiet, "q", false, "no progress bar")
	return withClient(ctx, f, args, 2, 2, func(c *client.Client) error {
		tx, _ := c.Begin(ctx)
		defer tx.Abort(ctx)
		src, err := tx.Open(ctx, f.pos[0])
		if err != nil {
			return err
		}
		r := *rep
		if r == 0 {
			fi, err := tx.Stat(ctx, src.Ino())
			if err != nil {
				return err
			}
			r = fi.Rep
		}
		bar := newProgress(src.Size(), "cp", quiet)
		pr, pw := io.Pipe()
		go func() { _, err := src.WriteTo(pw); pw.CloseWithError(err) }()
		_, err = c.CopyIn(ctx, io.TeeReader(pr, bar), f.pos[1], client.CopyOptions{Rep: r, CommitEvery: 1 << 30})
		pr.CloseWithError(err)
		bar.finish()
		return err
	})
}

func cmdChmod(ctx context.Context, args []string) error {
	f := newFlags("chmod", "MODE /path...", "Change permission bits (octal MODE).", true)
	return withClient(ctx, f, args, 2, -1, func(c *client.Client) error {
		m, err := strconv.ParseUint(f.pos[0], 8, 32)
		if err != nil || m > 0o7777 {
			return usagef("bad mode %q (octal, e.g. 644)", f.pos[0])
		}
		mode := client.UnixMode(uint32(m))
		return forEachInode(ctx, c, f.pos[1:], client.SetAttr{Mode: &mode})
	})
}

func cmdChown(ctx context.Context, args []string) error {
	f := newFlags("chown", "USER[:GROUP] /path...", "Change owner (and group).", true)
	return withClient(ctx, f, args, 2, -1, func(c *client.Client) error {
		u, g, hasGroup := strings.Cut(f.pos[0], ":")
		var s client.SetAttr
		if u != "" {
			s.User = &u
		}
		if hasGroup && g != "" {
			s.Group = &g
		}
		if s.User == nil && s.Group == nil {
			return usagef("empty owner %q", f.pos[0])
		}
		return forEachInode(ctx, c, f.pos[1:], s)
	})
}

func forEachInode(ctx context.Context, c *client.Client, args []string, s client.SetAttr) error {
	paths, err := expand(ctx, c, args)
	if err != nil {
		return err
	}
	return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		for _, p := range paths {
			fi, err := tx.Lookup(ctx, p)
			if err != nil {
				return err
			}
			if _, err := tx.SetAttr(ctx, fi.Ino, s); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})
}

func cmdStat(ctx context.Context, args []string) error {
	f := newFlags("stat", "[-json] /path...", "Show inode attributes.", true)
	asJSON := f.Bool("json", false, "one JSON object per path and line (as ls -json)")
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
				if *asJSON {
					if err := printJSON([]lsItem{{p, fi}}, "", false); err != nil {
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
	f := newFlags("blocks", "/path|glob...", "Show block lists: file block index range, then the datanode block range of each replica.", true)
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
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			if len(paths) > 1 {
				fmt.Fprintf(stdout, "%s:\n", escapeName(p))
			}
			fmt.Fprint(stdout, FormatBlocks(xs, fi.Rep))
		}
		return nil
	})
}

// FormatBlocks renders a block list as the original's "plasma blocks".
func FormatBlocks(xs []client.Extent, requested int) string {
	var b strings.Builder
	blocks, actual := 0, -1
	for _, x := range xs {
		fmt.Fprintf(&b, "%9d - %9d:", x.Index, x.Index+uint64(x.Count)-1)
		for _, r := range x.Replicas {
			fmt.Fprintf(&b, "[%d-%d]", r.Start, r.Start+uint64(x.Count)-1)
		}
		b.WriteByte('\n')
		blocks += x.Count * len(x.Replicas)
		if actual < 0 || len(x.Replicas) < actual {
			actual = len(x.Replicas)
		}
	}
	if actual < 0 {
		actual = 0
	}
	fmt.Fprintf(&b, "  blocks:                %d\n  actual replication:    %d\n  requested replication: %d\n", blocks, actual, requested)
	return b.String()
}

func cmdFsstat(ctx context.Context, args []string) error {
	f := newFlags("fsstat", "", "Show filesystem totals and datanodes.", true)
	return withClient(ctx, f, args, 0, 0, func(c *client.Client) error {
		s, err := c.FsStat(ctx)
		if err != nil {
			return err
		}
		bs := uint64(s.Blocksize)
		fmt.Fprintf(stdout, "blocksize:        %d\ntotal blocks:     %d (%s)\nused blocks:      %d (%s)\nfree blocks:      %d (%s)\nfiles:            %d\ndirectories:      %d\ndatanodes:        %d (%d alive)\nopen transactions: %d\n",
			s.Blocksize, s.TotalBlocks, human(s.TotalBlocks*bs), s.UsedBlocks, human(s.UsedBlocks*bs), s.FreeBlocks, human(s.FreeBlocks*bs),
			s.Files, s.Dirs, s.Datanodes, s.LiveDatanodes, s.OpenTxns)
		nodes, err := c.Datanodes(ctx)
		if err != nil {
			return err
		}
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
		for _, n := range nodes {
			state := "alive"
			if !n.Alive {
				state = "DEAD"
			}
			fmt.Fprintf(stdout, "datanode %d %s %s %s used %d/%d blocks\n", n.ID, escapeName(n.Identity), escapeName(n.Addr), state, n.Used, n.Blocks)
		}
		return nil
	})
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
	f := newFlags("fsck", "", "Check metadata consistency and verify every block replica's checksum on its datanode.", true)
	return withClient(ctx, f, args, 0, 0, func(c *client.Client) error {
		rep, err := c.Fsck(ctx)
		if err != nil {
			return err
		}
		for _, p := range rep.Problems {
			fmt.Fprintln(stdout, escapeText(p))
		}
		fmt.Fprintf(stdout, "fsck: %d files, %d blocks checked, %d problems\n", rep.Files, rep.Blocks, len(rep.Problems))
		if len(rep.Problems) > 0 {
			return fmt.Errorf("%d problems found", len(rep.Problems))
		}
		return nil
	})
}
