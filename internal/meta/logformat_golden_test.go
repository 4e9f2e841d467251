package meta_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/commitlog"
	"github.com/plasmafs/plasma/internal/meta"
)

// TestLogFormatGoldenDecodes: every record of each golden commit log, one
// per format version (written by the namenode of that version; see
// internal/namenode's TestLogReplayGivesNamenodeState), decodes to exactly the
// changes it decoded to then (expected-records.txt). Format 0 is the
// format from before the log had versions.
func TestLogFormatGoldenDecodes(t *testing.T) {
	for v := 0; v <= meta.LogFormatJournal; v++ {
		dir := fmt.Sprintf("testdata/logformat%d", v)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			got := decodeGoldenLog(t, dir)
			if out := os.Getenv("PLASMA_WRITE_GOLDEN"); out != "" {
				if filepath.Base(out) == filepath.Base(dir) {
					if err := os.WriteFile(filepath.Join(out, "expected-records.txt"), []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			want, err := os.ReadFile(filepath.Join(dir, "expected-records.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("decoded records differ from the golden ones:\n got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// decodeGoldenLog decodes every record of the log in dir (a copy of it:
// opening a log may write to it) and renders them as text.
func decodeGoldenLog(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "namenode.db.log"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	l, err := commitlog.Open(path, 0, 1, func(seq uint64, payload []byte) error {
		changes, err := meta.DecodeChanges(payload)
		if err != nil {
			return fmt.Errorf("record %d: %w", seq, err)
		}
		for i, c := range changes {
			fmt.Fprintf(&out, "record %d change %d\n", seq, i)
			dumpChange(&out, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	return out.String()
}

func dumpChange(b *strings.Builder, c *meta.Change) {
	inodes := append([]meta.Inode(nil), c.PutInodes...)
	sort.SliceStable(inodes, func(i, j int) bool { return inodes[i].Ino < inodes[j].Ino })
	for _, a := range inodes {
		fmt.Fprintf(b, "  put inode %d type=%d mode=%o user=%s group=%s size=%d nlink=%d mtime=%d ctime=%d rep=%d seq=%d target=%q\n",
			a.Ino, a.Type, a.Mode, a.User, a.Group, a.Size, a.Nlink, a.Mtime, a.Ctime, a.Rep, a.Seq, a.Target)
	}
	for _, ino := range c.DelInodes {
		fmt.Fprintf(b, "  delete inode %d\n", ino)
	}
	puts := append([]meta.Entry(nil), c.PutEntries...)
	sort.Slice(puts, func(i, j int) bool {
		return puts[i].Parent < puts[j].Parent || puts[i].Parent == puts[j].Parent && puts[i].Name < puts[j].Name
	})
	for _, e := range puts {
		fmt.Fprintf(b, "  put entry %d/%s -> %d\n", e.Parent, e.Name, e.Ino)
	}
	dels := append([]meta.EntryKey(nil), c.DelEntries...)
	sort.Slice(dels, func(i, j int) bool {
		return dels[i].Parent < dels[j].Parent || dels[i].Parent == dels[j].Parent && dels[i].Name < dels[j].Name
	})
	for _, k := range dels {
		fmt.Fprintf(b, "  delete entry %d/%s\n", k.Parent, k.Name)
	}
	for _, ino := range sortedKeys(c.Blocks) {
		fmt.Fprintf(b, "  blocks of %d:", ino)
		for _, x := range c.Blocks[ino] {
			fmt.Fprintf(b, " [index=%d count=%d gen=%d", x.Index, x.Count, x.Gen)
			for _, r := range x.Replicas {
				fmt.Fprintf(b, " replica=%d:%d", r.Node, r.Start)
			}
			fmt.Fprintf(b, " crc=%x]", x.CRC)
		}
		b.WriteString("\n")
	}
	for _, d := range c.PutNodes {
		fmt.Fprintf(b, "  put datanode %d identity=%s blocks=%d enabled=%v\n", d.ID, d.Identity, d.Blocks, d.Enabled)
	}
	if c.InoLimit != 0 {
		fmt.Fprintf(b, "  ino limit %d\n", c.InoLimit)
	}
	for _, ino := range sortedKeys(c.Touch) {
		fmt.Fprintf(b, "  touch %d mtime=%d\n", ino, c.Touch[ino])
	}
	ids := make([]uint32, 0, len(c.Drains))
	for id := range c.Drains {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		fmt.Fprintf(b, "  drain datanode %d %v\n", id, c.Drains[id])
	}
	for _, d := range c.RemoveNodes {
		fmt.Fprintf(b, "  remove datanode %d identity=%s\n", d.ID, d.Identity)
	}
	for _, j := range c.Journal {
		fmt.Fprintf(b, "  journal ino=%d index=%d gen=%d offset=%d crc=%x data=%q\n", j.Ino, j.Index, j.Gen, j.Offset, j.CRC, j.Data)
	}
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
