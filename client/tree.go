package client

import (
	"fmt"
	"strings"
)

// The original plasma tool and MapReduce accepted path prefixes naming
// the tree a path belongs to: "file::/a/b" is /a/b on the local machine,
// "plasma::/a/b" is /a/b in PlasmaFS. A path without a prefix is a
// PlasmaFS path.
const (
	TreeLocal  = "file::"
	TreePlasma = "plasma::"
)

// SplitTree splits a path argument into its tree and path: local reports
// a file:: path. A PlasmaFS path that contains "::" after a slash
// ("/a::b") has no prefix. Other prefixes (the original's -tree and ssh
// trees) are refused.
func SplitTree(arg string) (local bool, path string, err error) {
	prefix, rest, ok := strings.Cut(arg, "::")
	if !ok || strings.Contains(prefix, "/") {
		return false, arg, nil
	}
	if rest == "" {
		return false, "", fmt.Errorf("%q: the prefix %s:: names no path", arg, prefix)
	}
	switch prefix + "::" {
	case TreeLocal:
		return true, rest, nil
	case TreePlasma:
		return false, rest, nil
	}
	return false, "", fmt.Errorf("%q: unknown tree %s:: (file:: for local files, plasma:: or none for PlasmaFS)", arg, prefix)
}
