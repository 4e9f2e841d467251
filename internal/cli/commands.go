package cli

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/plasmafs/plasma/client"
)

func init() {
	register("put", "[-rep N] [-r] [-chain|-star] [-commit-every BYTES] LOCALFILE|-stdin /path", "copy a local file (or stdin, or with -r a tree) into PlasmaFS", cmdPut)
	register("get", "[-r] /path LOCALFILE", "copy a PlasmaFS file (or with -r a tree) to a local file", cmdGet)
	register("cat", "/path...", "write PlasmaFS files to stdout", cmdCat)
	register("ls", "[-l] [-h] [-R] [-i] [-a] [-d] [-1] [-json] [/path|glob...]", "list directories", cmdLs)
	register("mkdir", "[-p] [-mode MODE] /dir...", "create directories", cmdMkdir)
	register("create", "[-rep N] /path...", "create new empty files", cmdCreate)
	register("rm", "[-r] /path|glob...", "remove files (and with -r, directory trees)", cmdRm)
	register("mv", "/from /to", "rename or move", cmdMv)
	register("ln", "[-s] TARGET /linkpath", "make a hard (or with -s, symbolic) link", cmdLn)
	register("cp", "[-rep N] [file::|plasma::]FROM [file::|plasma::]TO", "copy a file within PlasmaFS, or to or from a local file (file::)", cmdCp)
	register("chmod", "MODE /path...", "change permission bits (octal)", cmdChmod)
	register("chown", "USER[:GROUP] /path...", "change owner and group", cmdChown)
	register("stat", "[-json] /path...", "show inode attributes", cmdStat)
	register("blocks", "[-json] /path|glob...", "show block lists (file index range: datanode block ranges)", cmdBlocks)
	register("fsstat", "[-json]", "show filesystem totals and datanodes", cmdFsstat)
	register("fsck", "[-json] [-wait DURATION]", "check metadata and every block replica; exit 1 on problems, 3 if some could not be checked", cmdFsck)
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

// withPaths connects, expands the path arguments and runs fn in one
// read-only transaction.
func withPaths(ctx context.Context, f *flags, args []string, fn func(tx *client.Txn, paths []string) error) error {
	return withClient(ctx, f, args, 1, -1, func(c *client.Client) error {
		paths, err := expand(ctx, c, f.pos)
		if err != nil {
			return err
		}
		tx := c.Begin()
		defer tx.Abort(ctx)
		return fn(tx, paths)
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
