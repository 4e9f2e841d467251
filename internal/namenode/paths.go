package namenode

import (
	"path"
	"sort"
	"strings"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

const maxSymlinks = 40

// checkName validates one path component.
func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fail(wire.ErrCodeInvalid, "invalid file name %q", name)
	case len(name) > wire.MaxName:
		return fail(wire.ErrCodeNameTooLong, "file name too long (%d bytes, limit %d): %.40s...", len(name), wire.MaxName, name)
	case strings.ContainsAny(name, "/\x00"):
		return fail(wire.ErrCodeInvalid, "invalid file name %q: contains '/' or NUL", name)
	}
	return nil
}

func checkPath(p string) error {
	if !strings.HasPrefix(p, "/") {
		return fail(wire.ErrCodeInvalid, "path %q is not absolute (PlasmaFS paths start with /)", p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return fail(wire.ErrCodeInvalid, "path %q contains NUL", p)
	}
	return nil
}

func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// resolve walks p as tx sees the namespace and returns the inode it names.
// Symlinks in the middle are always followed; a final one only if follow.
func (ns *namespace) resolve(tx *Txn, who *auth.Identity, p string, follow bool) (uint64, error) {
	if err := checkPath(p); err != nil {
		return 0, err
	}
	comps := splitPath(p)
	cur := uint64(rootIno)
	links := 0
	for len(comps) > 0 {
		name := comps[0]
		comps = comps[1:]
		a := ns.attr(tx, cur)
		if a == nil {
			return 0, fail(wire.ErrCodeNotFound, "%s: no such file or directory", p)
		}
		if a.Type != wire.TypeDir {
			return 0, fail(wire.ErrCodeNotDir, "%s: not a directory", p)
		}
		if !may(who, a, permSearch) {
			return 0, denied(who, p)
		}
		if name == ".." {
			cur = ns.parentOf(tx, cur)
			continue
		}
		if len(name) > wire.MaxName {
			return 0, fail(wire.ErrCodeNameTooLong, "%s: file name too long", p)
		}
		child := ns.entry(tx, cur, name)
		if child == 0 {
			return 0, fail(wire.ErrCodeNotFound, "%s: no such file or directory", p)
		}
		ca := ns.attr(tx, child)
		if ca == nil {
			return 0, fail(wire.ErrCodeNotFound, "%s: no such file or directory", p)
		}
		if ca.Type == wire.TypeSymlink && (len(comps) > 0 || follow) {
			links++
			if links > maxSymlinks {
				return 0, fail(wire.ErrCodeLoop, "%s: too many levels of symbolic links", p)
			}
			if strings.HasPrefix(ca.Target, "/") {
				cur = rootIno
			}
			comps = append(splitPath(ca.Target), comps...)
			continue
		}
		cur = child
	}
	// A trailing slash names a directory (a symlink to one is followed).
	if strings.HasSuffix(p, "/") && len(p) > 1 {
		if a := ns.attr(tx, cur); a != nil && a.Type != wire.TypeDir {
			return 0, fail(wire.ErrCodeNotDir, "%s: not a directory", p)
		}
	}
	return cur, nil
}

// slashOnNonDir reports a trailing slash on a path whose last component is
// not (to be) a directory.
func (ns *namespace) slashOnNonDir(tx *Txn, p string, parent uint64, name string) error {
	if !strings.HasSuffix(p, "/") {
		return nil
	}
	if c := ns.entry(tx, parent, name); c != 0 {
		if a := ns.attr(tx, c); a != nil && a.Type != wire.TypeDir {
			return fail(wire.ErrCodeNotDir, "%s: not a directory", p)
		}
	}
	return nil
}

func (ns *namespace) parentOf(tx *Txn, dir uint64) uint64 {
	if tx != nil {
		if p, ok := tx.parents[dir]; ok {
			return p
		}
	}
	if in := ns.inodes[dir]; in != nil && in.parent != 0 {
		return in.parent
	}
	return rootIno
}

// resolveParent returns the directory that holds the last component of p,
// and that component.
func (ns *namespace) resolveParent(tx *Txn, who *auth.Identity, p string) (uint64, string, error) {
	if err := checkPath(p); err != nil {
		return 0, "", err
	}
	p = strings.TrimRight(p, "/")
	if p == "" {
		return 0, "", fail(wire.ErrCodeInvalid, "the root directory cannot be used here")
	}
	i := strings.LastIndexByte(p, '/')
	dir, name := p[:i+1], p[i+1:]
	if err := checkName(name); err != nil {
		return 0, "", fail(wire.ErrCodeInvalid, "%s: %v", p, err)
	}
	parent, err := ns.resolve(tx, who, dir, true)
	if err != nil {
		return 0, "", err
	}
	if a := ns.attr(tx, parent); a == nil || a.Type != wire.TypeDir {
		return 0, "", fail(wire.ErrCodeNotDir, "%s: not a directory", dir)
	}
	return parent, name, nil
}

// glob expands pattern (path.Match syntax per component) on the namespace.
func (ns *namespace) glob(tx *Txn, who *auth.Identity, pattern string) ([]string, error) {
	if err := checkPath(pattern); err != nil {
		return nil, err
	}
	type item struct {
		path string
		ino  uint64
	}
	cur := []item{{"", rootIno}}
	for _, comp := range splitPath(pattern) {
		if _, err := path.Match(comp, ""); err != nil {
			return nil, fail(wire.ErrCodeInvalid, "bad pattern %q: %v", pattern, err)
		}
		var next []item
		for _, it := range cur {
			a := ns.attr(tx, it.ino)
			if a == nil || a.Type != wire.TypeDir || !may(who, a, permRead|permSearch) {
				continue
			}
			if !strings.ContainsAny(comp, "*?[\\") {
				if c := ns.entry(tx, it.ino, comp); c != 0 {
					next = append(next, item{it.path + "/" + comp, c})
				}
				continue
			}
			for name, c := range ns.list(tx, it.ino) {
				if ok, _ := path.Match(comp, name); ok && (!strings.HasPrefix(name, ".") || strings.HasPrefix(comp, ".")) {
					next = append(next, item{it.path + "/" + name, c})
				}
			}
		}
		cur = next
	}
	out := make([]string, 0, len(cur))
	for _, it := range cur {
		if it.path == "" {
			it.path = "/"
		}
		out = append(out, it.path)
	}
	sort.Strings(out)
	return out, nil
}
