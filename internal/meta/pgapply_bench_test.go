package meta_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/pgtest"
)

// createBatch is n create-shaped changes (a file inode, its name, its
// directory's mtime), inode numbers from first: what the checkpointer
// applies after n creates.
func createBatch(first uint64, n int) []*meta.Change {
	cs := make([]*meta.Change, n)
	for i := range cs {
		ino := first + uint64(i)
		cs[i] = &meta.Change{
			PutInodes:  []meta.Inode{{Ino: ino, Type: meta.TypeFile, Mode: 0o644, User: "u", Group: "g", Nlink: 1, Rep: 2, Mtime: int64(ino), Ctime: int64(ino)}},
			PutEntries: []meta.Entry{{EntryKey: meta.EntryKey{Parent: 1, Name: fmt.Sprintf("f%d", ino)}, Ino: ino}},
			Touch:      map[uint64]int64{1: int64(ino)},
		}
	}
	return cs
}

// BenchmarkPostgresCheckpoint: the checkpoint's apply throughput in rows
// (inode, name, directory touch) per second, batches of 1024 creates,
// beside a plain COPY of the same inode and name rows into the same
// tables (go test -run '^$' -bench PostgresCheckpoint ./internal/meta).
func BenchmarkPostgresCheckpoint(b *testing.B) {
	ctx := context.Background()
	pg := pgtest.StartDurable(b)
	const batch = 1024
	b.Run("Apply", func(b *testing.B) {
		s, err := meta.Open(ctx, pg.CreateDB(b), meta.OpenOptions{Create: true})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		next := uint64(2)
		b.ResetTimer()
		for range b.N {
			if err := s.Apply(ctx, createBatch(next, batch)); err != nil {
				b.Fatal(err)
			}
			next += batch
		}
		b.ReportMetric(float64(3*batch*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("COPY", func(b *testing.B) {
		url := pg.CreateDB(b)
		s, err := meta.Open(ctx, url, meta.OpenOptions{Create: true})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		next := int64(2)
		b.ResetTimer()
		for range b.N {
			inodes := make([][]any, batch)
			names := make([][]any, batch)
			for i := range inodes {
				ino := next + int64(i)
				inodes[i] = []any{ino, 1, 0o644, "u", "g", 0, 1, ino, ino, 2, 0, ""}
				names[i] = []any{int64(1), fmt.Sprintf("f%d", ino), ino}
			}
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.CopyFrom(ctx, pgx.Identifier{"inodes"}, []string{"ino", "type", "mode", "owner", "grp", "size", "nlink", "mtime", "ctime", "rep", "seq", "target"}, pgx.CopyFromRows(inodes)); err != nil {
					return err
				}
				_, err := tx.CopyFrom(ctx, pgx.Identifier{"names"}, []string{"parent", "name", "ino"}, pgx.CopyFromRows(names))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			next += batch
		}
		b.ReportMetric(float64(2*batch*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}
