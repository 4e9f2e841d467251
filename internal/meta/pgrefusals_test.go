package meta_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/pgtest"
)

// TestPostgresRefusals: a database the namenode cannot use as it is is
// refused at open, with a message saying why and what to do.
func TestPostgresRefusals(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.Start(t)
	formatted := func(t *testing.T) (string, string) {
		u := pg.CreateDB(t)
		s, err := meta.Open(ctx, u, meta.OpenOptions{Format: true})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		pu, _ := url.Parse(u)
		return u, strings.TrimPrefix(pu.Path, "/")
	}
	refused := func(t *testing.T, u string, o meta.OpenOptions, want string) {
		t.Helper()
		s, err := meta.Open(ctx, u, o)
		if err == nil {
			s.Close()
			t.Fatalf("opened; want a refusal saying %q", want)
		}
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refused with %q; want it to say %q", err, want)
		}
	}
	t.Run("NoNamespaceWithoutFormat", func(t *testing.T) {
		u := pg.CreateDB(t)
		refused(t, u, meta.OpenOptions{}, "holds no PlasmaFS namespace; start the namenode with -format")
		_, err := meta.Open(ctx, u, meta.OpenOptions{})
		if !errors.Is(err, meta.ErrNoDatabase) {
			t.Fatalf("%v: want ErrNoDatabase", err)
		}
	})
	t.Run("FormatRefusesANamespace", func(t *testing.T) {
		u, _ := formatted(t)
		refused(t, u, meta.OpenOptions{Format: true}, "already holds a namespace")
	})
	t.Run("NewerSchema", func(t *testing.T) {
		u, db := formatted(t)
		if err := pg.Exec(db, `UPDATE schema_version SET version = 99`); err != nil {
			t.Fatal(err)
		}
		refused(t, u, meta.OpenOptions{}, "schema version 99 is newer than this program's")
	})
	t.Run("OlderSchemaUntilUpgrade", func(t *testing.T) {
		u, db := formatted(t)
		// As a database made before migrations 3 (the extents' gen), 4
		// (the views) and 5 (drain marks, removed datanodes) is.
		if err := pg.Exec(db, `DROP VIEW files_on_datanode, usage_by_owner, files, paths, replicas`,
			`ALTER TABLE extents DROP COLUMN gen`, `ALTER TABLE datanodes DROP COLUMN draining`, `DROP TABLE removed_datanodes`,
			`UPDATE schema_version SET version = 2`); err != nil {
			t.Fatal(err)
		}
		refused(t, u, meta.OpenOptions{}, "schema version 2 is older than this program's: back the database up (pg_dump), then start the namenode once with -upgrade")
		s, err := meta.Open(ctx, u, meta.OpenOptions{Upgrade: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Apply(ctx, []*meta.Change{{Blocks: map[uint64][]meta.Extent{1: {{Index: 0, Count: 1, Replicas: []meta.Run{{Node: 1}}, CRC: []uint32{1}, Gen: 9}}}}}); err != nil {
			t.Fatalf("upgraded schema: %v", err)
		}
	})
	t.Run("ReadOnlyRole", func(t *testing.T) {
		u, db := formatted(t)
		if err := pg.Exec(db, `CREATE ROLE reader_`+db+` LOGIN`, `GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader_`+db); err != nil {
			t.Fatal(err)
		}
		ru := strings.Replace(u, "user=postgres", "user=reader_"+db, 1)
		refused(t, ru, meta.OpenOptions{}, `role "reader_`+db+`" may not write table inodes`)
	})
	t.Run("ReadOnlyDatabase", func(t *testing.T) {
		u, db := formatted(t)
		if err := pg.Exec("postgres", `ALTER DATABASE `+db+` SET default_transaction_read_only = on`); err != nil {
			t.Fatal(err)
		}
		refused(t, u, meta.OpenOptions{}, "the database is read-only")
	})
	t.Run("ServerNotRunning", func(t *testing.T) {
		u := strings.Replace(pg.URL("x"), "port=5432", "port=5999", 1)
		refused(t, u, meta.OpenOptions{}, "cannot reach PostgreSQL")
	})
}
