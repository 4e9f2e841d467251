package namenode

import (
	"fmt"
	"sort"

	"github.com/plasmafs/plasma/internal/wire"
)

// fsck checks the committed metadata for consistency and returns the
// problems found plus every file's block list, so the caller can check the
// blocks on the datanodes. Called with n.mu held.
func (n *Namenode) fsck() *wire.Response {
	var problems []string
	var files []wire.FileBlocks
	links := map[uint64]uint32{}
	reached := map[uint64]string{rootIno: "/"}
	type owner struct {
		path string
		idx  uint64
	}
	usedBy := map[[2]uint64]owner{}
	var walk func(dir uint64, p string)
	walk = func(dir uint64, p string) {
		in := n.inodes[dir]
		names := make([]string, 0, len(in.entries))
		for name := range in.entries {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			ino := in.entries[name]
			cp := p + name
			if p != "/" {
				cp = p + "/" + name
			}
			c := n.inodes[ino]
			if c == nil {
				problems = append(problems, fmt.Sprintf("%s: entry refers to missing inode %d", cp, ino))
				continue
			}
			links[ino]++
			if c.attr.Type == wire.TypeDir {
				if prev, ok := reached[ino]; ok {
					problems = append(problems, fmt.Sprintf("%s: directory inode %d also reached as %s", cp, ino, prev))
					continue
				}
				reached[ino] = cp
				walk(ino, cp)
				continue
			}
			if _, ok := reached[ino]; ok {
				continue // another hard link
			}
			reached[ino] = cp
			if c.attr.Type != wire.TypeFile {
				continue
			}
			bs := int64(n.cfg.Blocksize)
			nblocks := uint64((c.attr.Size + bs - 1) / bs)
			for _, x := range c.blocks {
				if len(x.CRC) != int(x.Count) {
					problems = append(problems, fmt.Sprintf("%s: blocks %d-%d have %d checksums", cp, x.Index, x.Index+uint64(x.Count)-1, len(x.CRC)))
				}
				if x.Index+uint64(x.Count) > nblocks {
					problems = append(problems, fmt.Sprintf("%s: block %d lies beyond the file size %d", cp, x.Index+uint64(x.Count)-1, c.attr.Size))
				}
				if len(x.Replicas) < int(c.attr.Rep) {
					problems = append(problems, fmt.Sprintf("%s: blocks %d-%d have %d of %d replicas", cp, x.Index, x.Index+uint64(x.Count)-1, len(x.Replicas), c.attr.Rep))
				}
				for _, r := range x.Replicas {
					dn := n.nodes[r.Node]
					if dn == nil {
						problems = append(problems, fmt.Sprintf("%s: blocks %d-%d are on unknown datanode %d", cp, x.Index, x.Index+uint64(x.Count)-1, r.Node))
						continue
					}
					if r.Start+uint64(x.Count) > dn.Blocks {
						problems = append(problems, fmt.Sprintf("%s: blocks %d-%d lie beyond the end of datanode %s", cp, x.Index, x.Index+uint64(x.Count)-1, dn.Identity))
					}
					for k := uint64(0); k < uint64(x.Count); k++ {
						key := [2]uint64{uint64(r.Node), r.Start + k}
						if o, dup := usedBy[key]; dup {
							problems = append(problems, fmt.Sprintf("%s: block %d shares datanode %s block %d with %s block %d", cp, x.Index+k, dn.Identity, r.Start+k, o.path, o.idx))
						} else {
							usedBy[key] = owner{cp, x.Index + k}
						}
						if !dn.used.isUsedSafe(r.Start + k) {
							problems = append(problems, fmt.Sprintf("%s: block %d (datanode %s block %d) is marked free", cp, x.Index+k, dn.Identity, r.Start+k))
						}
					}
				}
			}
			files = append(files, wire.FileBlocks{Path: cp, Size: c.attr.Size, Rep: c.attr.Rep, Extents: c.blocks})
		}
	}
	walk(rootIno, "/")
	for ino, in := range n.inodes {
		if _, ok := reached[ino]; !ok && in.users == 0 {
			problems = append(problems, fmt.Sprintf("inode %d is not reachable from /", ino))
		}
		if in.attr.Type != wire.TypeDir && links[ino] != in.attr.Nlink && in.users == 0 {
			problems = append(problems, fmt.Sprintf("%s: link count %d but %d names", reached[ino], in.attr.Nlink, links[ino]))
		}
	}
	sort.Strings(problems)
	return &wire.Response{Problems: problems, Files: files, Nodes: n.nodeList()}
}
