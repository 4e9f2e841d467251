package powercut

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Power-cut tests: the namenode's database and the datanodes' volumes are
// on a filesystem that loses every write not fsynced when the test cuts
// the power (internal/lossyfs). Each test was checked to fail when the
// fsync it depends on is removed.

// TestPowerCutKeepsAcknowledgedCommits: several clients commit many
// transactions (creates, renames, small in-place writes and appends), then
// the power fails. After the restart every acknowledged change is there
// and fsck is clean. Fails with SQLite at synchronous=OFF.
func TestPowerCutKeepsAcknowledgedCommits(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	const clients, rounds = 4, 25
	models := make([]map[string][]byte, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		cl := c.Client(client.Config{})
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			models[i], errs[i] = commitRounds(ctx, cl, i, rounds, int(c.Opts.Blocksize))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	c.PowerCut()

	cl := c.Client(client.Config{})
	defer cl.Close()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	var problems []string
	for i, model := range models {
		dir := fmt.Sprintf("/c%d", i)
		var want, got []string
		for p := range model {
			want = append(want, strings.TrimPrefix(p, dir+"/"))
		}
		ents, err := tx.ReadDir(ctx, dir)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", dir, err))
			continue
		}
		for _, e := range ents {
			got = append(got, e.Name)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("%s holds %d names, want the %d committed: got %v, want %v", dir, len(got), len(want), got, want))
		}
		for p, data := range model {
			f, err := tx.Open(ctx, p)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", p, err))
				continue
			}
			b := make([]byte, f.Size()+1)
			n, err := f.ReadAt(b, 0)
			if !bytes.Equal(b[:n], data) {
				problems = append(problems, fmt.Sprintf("%s: read %d of %d bytes, error %v, equal %v", p, n, len(data), err, bytes.Equal(b[:n], data)))
			}
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		t.Fatalf("after the power cut, %d acknowledged changes are lost or wrong:\n%s", len(problems), firstLines(strings.Join(problems, "\n"), 10))
	}
	if rep, err := cl.Fsck(ctx); err != nil || len(rep.Problems) > 0 {
		t.Fatalf("fsck after the power cut: %v\n%s", err, firstLines(strings.Join(rep.Problems, "\n"), 10))
	}
	c.MustRun("fsck")
}

// commitRounds makes client number i commit one transaction per round in
// its own directory: a new file, the rename of the previous round's file,
// an overwrite of 8 bytes of a counter file and an append to a log file.
// It returns the content of every file as last committed.
func commitRounds(ctx context.Context, cl *client.Client, i, rounds, bs int) (map[string][]byte, error) {
	dir := fmt.Sprintf("/c%d", i)
	model := map[string][]byte{}
	rep := client.CreateOptions{Rep: 1 + i%2}
	err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		if _, err := tx.Mkdir(ctx, dir, 0o755); err != nil {
			return err
		}
		for _, name := range []string{"counter", "log"} {
			f, err := tx.CreateFile(ctx, dir+"/"+name, rep)
			if err != nil {
				return err
			}
			if name == "counter" {
				f.Write([]byte("00000000 counter"))
			}
		}
		return nil
	})
	if err != nil {
		return model, fmt.Errorf("client %d: set-up: %w", i, err)
	}
	model[dir+"/counter"] = []byte("00000000 counter")
	model[dir+"/log"] = nil
	for r := 1; r <= rounds; r++ {
		name := fmt.Sprintf("%s/f%d", dir, r)
		data := bytes.Repeat([]byte(fmt.Sprintf("client %d round %d;", i, r)), (r*4099)%(3*bs)/20+1)
		counter := append([]byte(fmt.Sprintf("%08d", r)), " counter"...)
		line := []byte(fmt.Sprintf("round %d of client %d\n", r, i))
		tx := cl.Begin()
		err = func() error {
			f, err := tx.CreateFile(ctx, name, client.CreateOptions{Rep: 1 + (i+r)%2})
			if err != nil {
				return err
			}
			if _, err := f.Write(data); err != nil {
				return err
			}
			if r > 1 {
				if err := tx.Rename(ctx, fmt.Sprintf("%s/f%d", dir, r-1), fmt.Sprintf("%s/g%d", dir, r-1)); err != nil {
					return err
				}
			}
			cf, err := tx.Open(ctx, dir+"/counter")
			if err != nil {
				return err
			}
			if _, err := cf.WriteAt(counter[:8], 0); err != nil {
				return err
			}
			lf, err := tx.Open(ctx, dir+"/log")
			if err != nil {
				return err
			}
			if _, err := lf.WriteAt(line, lf.Size()); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}()
		if err != nil {
			tx.Abort(ctx)
			return model, fmt.Errorf("client %d round %d: %w", i, r, err)
		}
		// Acknowledged.
		model[name] = data
		if r > 1 {
			prev := fmt.Sprintf("%s/f%d", dir, r-1)
			model[fmt.Sprintf("%s/g%d", dir, r-1)] = model[prev]
			delete(model, prev)
		}
		model[dir+"/counter"] = counter
		model[dir+"/log"] = append(model[dir+"/log"], line...)
	}
	return model, nil
}

// TestPowerCutKeepsAcknowledgedPuts: files copied in with plasma put (the
// client writes blocks into the local datanodes' block files through
// passed descriptors; the second replica goes over TCP) at replication 1
// and 2 read back byte for byte after a power cut, and fsck is clean.
// Fails without the datanode's fdatasync.
func TestPowerCutKeepsAcknowledgedPuts(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{Datanodes: 3})
	bs := int(c.Opts.Blocksize)
	dir := t.TempDir()
	files := map[string][]byte{}
	for _, rep := range []int{1, 2} {
		for k, size := range []int{5*bs + 17, 40 * bs} {
			data := testkit.RandomBytes(t, size)
			local := filepath.Join(dir, fmt.Sprintf("in-%d-%d", rep, k))
			if err := os.WriteFile(local, data, 0o644); err != nil {
				t.Fatal(err)
			}
			p := fmt.Sprintf("/put-rep%d-%d", rep, k)
			c.MustRun("put", "-rep", strconv.Itoa(rep), local, p)
			files[p] = data
		}
	}

	c.PowerCut()

	for p, want := range files {
		local := filepath.Join(dir, "out"+strings.ReplaceAll(p, "/", "-"))
		if out, code := c.Run(nil, "get", p, local); code != 0 {
			t.Errorf("plasma get %s after the power cut: exit %d:\n%s", p, code, firstLines(out, 3))
			continue
		}
		got, err := os.ReadFile(local)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s reads back %d bytes after the power cut, differing from the %d put", p, len(got), len(want))
		}
	}
	if out, code := c.Run(nil, "fsck"); code != 0 {
		t.Fatalf("plasma fsck after the power cut: exit %d:\n%s", code, firstLines(out, 10))
	}
}

// firstLines returns the first n lines of s, and how many more there are.
func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n... and %d more lines", len(lines)-n)
}
