package meta

import (
	"fmt"
	"strings"
)

// The views answer an operator's common questions with SQL against a
// running namenode's database (read-only: they write nothing and take no
// lock the namenode waits for; see README, "Querying the metadata"):
//
//	paths              (ino, path): every name, as a path from the root
//	files              (path, ino, owner, grp, size, rep, mode, mtime): regular files
//	usage_by_owner     (owner, files, bytes): regular files per owner, each inode once
//	replicas           (ino, idx, count, node, start): one row per extent and replica
//	files_on_datanode  (node, identity, path, owner, size): files with a replica on a datanode
//
// Both engines have them, with the same columns; only the decoding of an
// extent's replica list (12 bytes per replica: u32 node, u64 start, little
// endian) differs.

// viewsCommon are the views whose SQL both engines run.
const viewsCommon = `
	CREATE VIEW paths AS
		WITH RECURSIVE p(ino, path) AS (
			SELECT CAST(1 AS BIGINT), CAST('/' AS TEXT)
			UNION ALL
			SELECT n.ino, CASE WHEN p.path = '/' THEN '/' || n.name ELSE p.path || '/' || n.name END
			FROM names n JOIN p ON n.parent = p.ino)
		SELECT ino, path FROM p;
	CREATE VIEW files AS
		SELECT p.path, i.ino, i.owner, i.grp, i.size, i.rep, i.mode, i.mtime
		FROM paths p JOIN inodes i ON i.ino = p.ino WHERE i.type = 1;
	CREATE VIEW usage_by_owner AS
		SELECT owner, count(*) AS files, sum(size) AS bytes FROM inodes WHERE type = 1 GROUP BY owner;
	CREATE VIEW files_on_datanode AS
		SELECT DISTINCT r.node, d.identity, f.path, f.owner, f.size
		FROM replicas r JOIN files f ON f.ino = r.ino LEFT JOIN datanodes d ON d.id = r.node;`

// pgViews decode the replica list with get_byte.
var pgViews = `
	CREATE VIEW replicas AS
		SELECT e.ino, e.idx, e.count, ` + leBytes("get_byte(e.replicas, o + %d)", 0, 4) + ` AS node,
			` + leBytes("get_byte(e.replicas, o + %d)", 4, 8) + ` AS start
		FROM extents e, generate_series(0, length(e.replicas) - 12, 12) AS o;` + viewsCommon

// sqliteViews decode it from hex(), SQLite having no byte access to blobs.
var sqliteViews = `
	CREATE VIEW replicas AS
		WITH RECURSIVE o(ino, idx, count, r, off) AS (
			SELECT ino, idx, count, replicas, 0 FROM extents WHERE length(replicas) >= 12
			UNION ALL
			SELECT ino, idx, count, r, off + 12 FROM o WHERE off + 24 <= length(r))
		SELECT ino, idx, count, ` + leBytes(sqliteByte, 0, 4) + ` AS node,
			` + leBytes(sqliteByte, 4, 8) + ` AS start
		FROM o;` + viewsCommon

// sqliteByte is byte off+%d of blob r as a number.
const sqliteByte = "((instr('0123456789ABCDEF', substr(hex(substr(r, off + %[1]d + 1, 1)), 1, 1)) - 1) * 16" +
	" + instr('0123456789ABCDEF', substr(hex(substr(r, off + %[1]d + 1, 1)), 2, 1)) - 1)"

// leBytes is the SQL of a little-endian number of n bytes from offset
// first, each byte given by byteSQL (a format of its offset).
func leBytes(byteSQL string, first, n int) string {
	terms := make([]string, n)
	for k := range n {
		terms[k] = fmt.Sprintf("(CAST("+byteSQL+" AS BIGINT) << %d)", first+k, 8*k)
	}
	return "(" + strings.Join(terms, " + ") + ")"
}
