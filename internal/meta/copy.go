package meta

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// sqlStore is a store kept in SQL tables (both engines): what Copy and
// Compare read and write.
type sqlStore interface {
	sqlDB() *sql.DB
}

func (s *SQLite) sqlDB() *sql.DB   { return s.db }
func (s *Postgres) sqlDB() *sql.DB { return s.db }

// table describes one table for Copy and Compare: its columns, how many
// lead the primary key, and each column's kind (i: integer, s: text, b:
// blob, B: boolean).
type table struct {
	name  string
	cols  []string
	key   int
	kinds string
}

// tables are every table of the namespace (schema_version is each
// database's own).
var tables = []table{
	{"inodes", []string{"ino", "type", "mode", "owner", "grp", "size", "nlink", "mtime", "ctime", "rep", "seq", "target"}, 1, "iiissiiiiiis"},
	{"names", []string{"parent", "name", "ino"}, 2, "isi"},
	{"extents", []string{"ino", "idx", "count", "replicas", "crcs", "gen"}, 2, "iiibbi"},
	{"datanodes", []string{"id", "identity", "blocks", "enabled", "draining"}, 1, "isiBB"},
	{"removed_datanodes", []string{"id", "identity"}, 1, "is"},
	{"counters", []string{"name", "value"}, 1, "si"},
	{"namespace", []string{"id"}, 1, "s"},
}

// localCounters belong to one database, not to the namespace: whether it
// is in use, and how far it holds its namenode's commit log (a copy is a
// checkpoint of its own, started with a new log, as a backup is).
var localCounters = map[string]bool{"in_use": true, "log_seq": true}

// CopyStats counts the rows copied, per table.
type CopyStats map[string]int

func (c CopyStats) String() string {
	var parts []string
	for _, t := range tables {
		parts = append(parts, fmt.Sprintf("%d %s", c[t.name], t.name))
	}
	return strings.Join(parts, ", ")
}

// Copy replaces everything dst holds (a namespace just formatted) with
// what src holds, in one transaction of dst, then checks that every
// table of dst equals src's. Both must be SQL stores of this program's
// schema version, and src must not change meanwhile (its namenode
// stopped).
func Copy(ctx context.Context, src, dst Store) (CopyStats, error) {
	from, ok1 := src.(sqlStore)
	to, ok2 := dst.(sqlStore)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("copy: both stores must be SQL databases")
	}
	stats := CopyStats{}
	tx, err := to.sqlDB().BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("copy: %w", err)
	}
	defer tx.Rollback()
	for _, t := range tables {
		rows, err := readTable(ctx, from.sqlDB(), t)
		if err != nil {
			return nil, fmt.Errorf("copy: read %s: %w", t.name, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+t.name); err != nil {
			return nil, fmt.Errorf("copy: clear %s: %w", t.name, err)
		}
		marks := make([]string, len(t.cols))
		for i := range marks {
			marks[i] = fmt.Sprintf("$%d", i+1)
		}
		ins, err := tx.PrepareContext(ctx, fmt.Sprintf(`INSERT INTO %s (%s) VALUES (%s)`, t.name, strings.Join(t.cols, ", "), strings.Join(marks, ", ")))
		if err != nil {
			return nil, fmt.Errorf("copy: %s: %w", t.name, err)
		}
		for _, k := range sortedKeys(rows) {
			if _, err := ins.ExecContext(ctx, rows[k]...); err != nil {
				ins.Close()
				return nil, fmt.Errorf("copy: write %s row %s: %w", t.name, k, err)
			}
		}
		ins.Close()
		stats[t.name] = len(rows)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("copy: commit: %w", err)
	}
	if err := Compare(ctx, src, dst); err != nil {
		return nil, err
	}
	return stats, nil
}

// Compare returns nil if every table of a equals b's (counters local to
// one database left out), else an error naming the first difference.
func Compare(ctx context.Context, a, b Store) error {
	sa, ok1 := a.(sqlStore)
	sb, ok2 := b.(sqlStore)
	if !ok1 || !ok2 {
		return fmt.Errorf("compare: both stores must be SQL databases")
	}
	for _, t := range tables {
		ra, err := readTable(ctx, sa.sqlDB(), t)
		if err != nil {
			return fmt.Errorf("compare: read %s: %w", t.name, err)
		}
		rb, err := readTable(ctx, sb.sqlDB(), t)
		if err != nil {
			return fmt.Errorf("compare: read %s of the copy: %w", t.name, err)
		}
		for _, k := range sortedKeys(ra) {
			if !reflect.DeepEqual(ra[k], rb[k]) {
				return fmt.Errorf("compare: table %s, row %s: %v in the original, %v in the copy", t.name, k, ra[k], rb[k])
			}
		}
		if len(ra) != len(rb) {
			for _, k := range sortedKeys(rb) {
				if _, ok := ra[k]; !ok {
					return fmt.Errorf("compare: table %s: row %s is only in the copy", t.name, k)
				}
			}
		}
	}
	return nil
}

// readTable reads every row of t, by primary key (rendered as text).
func readTable(ctx context.Context, db *sql.DB, t table) (map[string][]any, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+strings.Join(t.cols, ", ")+` FROM `+t.name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]any{}
	for rows.Next() {
		dst := make([]any, len(t.kinds))
		for i, k := range t.kinds {
			switch k {
			case 'i':
				dst[i] = new(int64)
			case 's':
				dst[i] = new(string)
			case 'b':
				dst[i] = new([]byte)
			case 'B':
				dst[i] = new(bool)
			}
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
		vals := make([]any, len(dst))
		for i, p := range dst {
			vals[i] = reflect.ValueOf(p).Elem().Interface()
			if b, ok := vals[i].([]byte); ok && b == nil {
				vals[i] = []byte{} // an empty blob reads as nil or empty by engine
			}
		}
		if t.name == "counters" && localCounters[vals[0].(string)] {
			continue
		}
		out[fmt.Sprintf("%v", vals[:t.key])] = vals // the first key column is never text when there are two
	}
	return out, rows.Err()
}

func sortedKeys(m map[string][]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
