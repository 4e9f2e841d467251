package testkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// PartLines returns the lines of each part file of PlasmaFS directory dir.
func PartLines(t *testing.T, c *clustertest.Procs, dir string, parts int) [][]string {
	t.Helper()
	out := make([][]string, parts)
	for p := range out {
		s := c.MustRun("cat", fmt.Sprintf("%s/part-%05d", dir, p))
		if s != "" {
			out[p] = strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		}
	}
	return out
}

// OpenDir makes a directory every OS user may search, removed at the end:
// files in it are protected by their own mode only.
func OpenDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "plasma-open-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// PlainHTTP sends GET /info over plain TCP and returns what comes back
// before the server closes the connection (or 10 s pass).
func PlainHTTP(t *testing.T, addr string) string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(nc, "GET /info HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	b, _ := io.ReadAll(nc)
	return string(b)
}

const (
	MRWordMapper = `awk '{for (i = 1; i <= NF; i++) print $i "\t1"}'`
	// The reducer gets its partition sorted by key: uniq -c of the keys
	// is exactly what 'sort | uniq -c' prints for them.
	MRCountReducer = `cut -f1 | uniq -c`
)

// MRText generates n lines of words with skewed frequencies; some lines
// are long enough to cross several 64 KiB blocks.
func MRText(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		words := 1 + r.IntN(12)
		if r.IntN(500) == 0 {
			words = 20000 + r.IntN(30000)
		}
		for w := 0; w < words; w++ {
			if w > 0 {
				b.WriteByte(" \t"[r.IntN(10)/9])
			}
			if r.IntN(4) == 0 {
				b.WriteString("the") // one key with a large share of the records
			} else {
				fmt.Fprintf(&b, "w%d", int(r.ExpFloat64()*300))
			}
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// MRPut writes files into dir in PlasmaFS with the client library.
func MRPut(t *testing.T, c *clustertest.Procs, dir string, files map[string][]byte) {
	t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		if _, err := tx.MkdirAll(ctx, dir, 0o755); err != nil {
			return err
		}
		for name, data := range files {
			f, err := tx.CreateFile(ctx, dir+"/"+name, client.CreateOptions{Rep: 1})
			if err != nil {
				return err
			}
			if _, err := f.Write(data); err != nil {
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// LocalCount is the reference: the words of the files through
// 'LC_ALL=C sort | uniq -c', computed locally.
func LocalCount(t *testing.T, files map[string][]byte) []string {
	t.Helper()
	var all bytes.Buffer
	for _, d := range files {
		all.Write(d)
		if len(d) > 0 && d[len(d)-1] != '\n' {
			all.WriteByte('\n')
		}
	}
	cmd := exec.Command("sh", "-c", `awk '{for (i = 1; i <= NF; i++) print $i}' | LC_ALL=C sort | uniq -c`)
	cmd.Stdin = &all
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	sort.Strings(lines)
	return lines
}

// SameLines fails the test unless got, sorted, equals want (sorted).
func SameLines(t *testing.T, got, want []string) {
	t.Helper()
	got = append([]string(nil), got...)
	sort.Strings(got)
	if len(got) != len(want) {
		t.Fatalf("%d output lines, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("output line %d: %q, want %q", i, got[i], want[i])
		}
	}
}

// ReportValue returns the value of field (a "field: value" line) in a
// job report.
func ReportValue(t *testing.T, report, field string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(field) + `:\s+(.*)$`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("report has no %q:\n%s", field, report)
	}
	return m[1]
}
