package clustertest

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/plasmafs/plasma/client"
)

// Tree renders the namespace as cl sees it, one line per name in path
// order with the attributes a restart must keep (times left out: a
// directory's are the namenode's clock), so two namespaces can be
// compared as text.
func Tree(t TB, cl *client.Client) string {
	t.Helper()
	ctx := context.Background()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	var b strings.Builder
	var walk func(path string)
	walk = func(path string) {
		fi, err := tx.Lstat(ctx, path)
		if err != nil {
			t.Fatalf("lstat %s: %v", path, err)
		}
		fmt.Fprintf(&b, "%s ino=%d type=%d mode=%v user=%s group=%s size=%d nlink=%d rep=%d seq=%d target=%q\n",
			path, fi.Ino, fi.Type, fi.Mode, fi.User, fi.Group, fi.Size, fi.Nlink, fi.Rep, fi.Seq, fi.Target)
		if fi.Type != client.TypeDir {
			return
		}
		ents, err := tx.ReadDir(ctx, path)
		if err != nil {
			t.Fatalf("readdir %s: %v", path, err)
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
		for _, e := range ents {
			walk(strings.TrimSuffix(path, "/") + "/" + e.Name)
		}
	}
	walk("/")
	return b.String()
}
