package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/plasmafs/plasma/internal/metrics"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/kv"
)

// plasma kv: the original's plasma_kv commands, as subcommands.
func init() {
	register("kv create", "-db DIR [-max-key-length N] [-rep N]", "create a Plasma KV database (a PlasmaFS directory)", cmdKVCreate)
	register("kv insert", "-db DIR (KEY | -files FILE... | -keys-and-files [KEY FILE]...)", "insert or replace keys in one transaction (value of KEY from stdin)", cmdKVInsert)
	register("kv lookup", "-db DIR (KEY... | -stdin) [-not-found S] [-no-lf] [-interval N]", "print the values of keys", cmdKVLookup)
	register("kv delete", "-db DIR (KEY... | -stdin)", "delete keys in one transaction", cmdKVDelete)
	register("kv iterate", "-db DIR [-count] [-prefix P] [-from K] [-to K]", "print the keys in byte order (or count them)", cmdKVIterate)
	register("kv vacuum", "-db DIR [-rep N]", "rewrite the database compactly, reclaiming replaced and deleted values", cmdKVVacuum)
	register("kv stat", "-db DIR", "show a database's version, keys, size and garbage", cmdKVStat)
	register("kv serve", "-db DIR [-listen HOST:PORT] [-refresh DURATION] [-writable]", "serve lookups over HTTP: GET /KEY, HEAD, POST /-/refresh (PUT, DELETE with -writable)", cmdKVServe)
}

// kvFlags are a kv subcommand's flags with -db.
type kvFlags struct {
	*flags
	db string
}

func newKVFlags(sub, args, summary string) *kvFlags {
	f := &kvFlags{flags: newFlags("kv "+sub, args, summary, true)}
	f.StringVar(&f.db, "db", "", "the database: a PlasmaFS directory (required)")
	return f
}

// run parses the flags, connects and runs fn with the client.
func (f *kvFlags) run(ctx context.Context, args []string, fn func(c *client.Client) error) error {
	if err := f.parse(args); err != nil {
		return err
	}
	if f.db == "" {
		return usagef("-db DIR is required")
	}
	if !strings.HasPrefix(f.db, "/") {
		return usagef("-db %q: the database is an absolute PlasmaFS path", f.db)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// open opens the database.
func (f *kvFlags) open(ctx context.Context, c *client.Client, opt kv.Options) (*kv.DB, error) {
	return kv.Open(ctx, c, f.db, opt)
}

func cmdKVCreate(ctx context.Context, args []string) error {
	f := newKVFlags("create", "-db DIR [-max-key-length N] [-rep N]",
		"Create a Plasma KV database: the directory DIR with its files (DIR/kv, the database, and\nDIR/lock, which the writer locks). Keys may be up to -max-key-length bytes long.")
	maxKey := f.intRange("max-key-length", kv.DefaultMaxKeyLength, 1, kv.MaxKeyLengthLimit, "the key length limit in bytes")
	rep := f.intRange("rep", 0, 0, client.MaxReplication, "replication of the database file (0: cluster default)")
	return f.run(ctx, args, func(c *client.Client) error {
		if len(f.pos) != 0 {
			return usagef("unexpected argument %q", f.pos[0])
		}
		return kv.Create(ctx, c, f.db, kv.CreateOptions{MaxKeyLength: *maxKey, Rep: *rep})
	})
}

func cmdKVInsert(ctx context.Context, args []string) error {
	f := newKVFlags("insert", "-db DIR (KEY | -files FILE... | -keys-and-files [KEY FILE]...)",
		"Insert or replace keys, all in one transaction (atomic: all or nothing).\n"+
			"  KEY              the value is read from stdin\n"+
			"  -files FILE...   one key per local file: its base name, with the file's contents\n"+
			"  -keys-and-files  pairs KEY FILE as arguments, or without arguments one pair a line\n"+
			"                   on stdin (KEY, a tab, FILE)\n"+
			"Values are streamed, never held whole in memory.")
	files := f.Bool("files", false, "the arguments are local files (key: the base name)")
	pairs := f.Bool("keys-and-files", false, "the arguments (or stdin lines KEY<TAB>FILE) are pairs of key and local file")
	return f.run(ctx, args, func(c *client.Client) error {
		type item struct{ key, file string }
		var items []item
		switch {
		case *files && *pairs:
			return usagef("-files and -keys-and-files exclude each other")
		case *files:
			if len(f.pos) == 0 {
				return usagef("-files needs at least one FILE")
			}
			for _, p := range f.pos {
				items = append(items, item{filepath.Base(p), p})
			}
		case *pairs:
			if len(f.pos)%2 != 0 {
				return usagef("-keys-and-files needs pairs of KEY FILE")
			}
			for i := 0; i < len(f.pos); i += 2 {
				items = append(items, item{f.pos[i], f.pos[i+1]})
			}
			if len(f.pos) == 0 {
				sc := newLineScanner(os.Stdin)
				for sc.Scan() {
					line := sc.Text()
					if line == "" {
						continue
					}
					k, file, ok := strings.Cut(line, "\t")
					if !ok {
						k, file, ok = strings.Cut(line, " ")
					}
					if !ok || file == "" {
						return fmt.Errorf("stdin: %q: want KEY, a tab and FILE", line)
					}
					items = append(items, item{k, file})
				}
				if err := sc.Err(); err != nil {
					return err
				}
			}
		default:
			if len(f.pos) != 1 {
				return usagef("give one KEY (its value on stdin), or -files, or -keys-and-files")
			}
			items = append(items, item{f.pos[0], ""})
		}
		db, err := f.open(ctx, c, kv.Options{CacheBytes: 8 << 20})
		if err != nil {
			return err
		}
		defer db.Close()
		w, err := db.Begin(ctx)
		if err != nil {
			return err
		}
		defer w.Abort(ctx)
		for _, it := range items {
			if it.file == "" {
				if err := w.PutReader([]byte(it.key), os.Stdin); err != nil {
					return fmt.Errorf("key %q: %w", it.key, err)
				}
				continue
			}
			lf, err := os.Open(it.file)
			if err != nil {
				return err
			}
			err = w.PutReader([]byte(it.key), lf)
			lf.Close()
			if err != nil {
				return fmt.Errorf("%s (key %q): %w", it.file, it.key, err)
			}
		}
		return w.Commit(ctx)
	})
}

// newLineScanner reads lines of up to 1 MiB (keys may be up to 64 KiB).
func newLineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return sc
}

func cmdKVLookup(ctx context.Context, args []string) error {
	f := newKVFlags("lookup", "-db DIR (KEY... | -stdin) [-not-found S] [-no-lf] [-interval N]",
		"Print the value of each key, followed by a linefeed (see -no-lf). A missing key prints\nthe -not-found string instead. With -stdin, keys come one a line from stdin and each\nanswer is flushed at once; -interval N then refreshes the snapshot every N seconds, so a\nlong-running lookup sees new commits.")
	useStdin := f.Bool("stdin", false, "read the keys from stdin, one a line")
	notFound := f.String("not-found", "NOT_FOUND", "printed for a missing key")
	noLF := f.Bool("no-lf", false, "no linefeed after each value")
	interval := f.intRange("interval", 0, 0, 1<<20, "with -stdin: refresh the snapshot every N seconds (0: never)")
	return f.run(ctx, args, func(c *client.Client) error {
		if *useStdin == (len(f.pos) > 0) {
			return usagef("give KEY... or -stdin")
		}
		db, err := f.open(ctx, c, kv.Options{})
		if err != nil {
			return err
		}
		defer db.Close()
		out := bufio.NewWriterSize(stdout, 256<<10)
		defer out.Flush()
		lookup := func(key string) error {
			v, err := db.Lookup([]byte(key))
			if errors.Is(err, kv.ErrNotFound) {
				io.WriteString(out, *notFound)
			} else if err != nil {
				return fmt.Errorf("key %q: %w", key, err)
			} else {
				_, err := v.WriteTo(out)
				v.Close()
				if err != nil {
					return fmt.Errorf("key %q: %w", key, err)
				}
			}
			if !*noLF {
				out.WriteByte('\n')
			}
			return nil
		}
		if !*useStdin {
			for _, k := range f.pos {
				if err := lookup(k); err != nil {
					return err
				}
			}
			return out.Flush()
		}
		last := time.Now()
		sc := newLineScanner(os.Stdin)
		for sc.Scan() {
			if *interval > 0 && time.Since(last) >= time.Duration(*interval)*time.Second {
				if err := db.Refresh(ctx); err != nil {
					return err
				}
				last = time.Now()
			}
			if err := lookup(sc.Text()); err != nil {
				return err
			}
			if err := out.Flush(); err != nil {
				return err
			}
		}
		return sc.Err()
	})
}

func cmdKVDelete(ctx context.Context, args []string) error {
	f := newKVFlags("delete", "-db DIR (KEY... | -stdin)", "Delete keys (missing ones are ignored), all in one transaction.")
	useStdin := f.Bool("stdin", false, "read the keys from stdin, one a line")
	return f.run(ctx, args, func(c *client.Client) error {
		if *useStdin == (len(f.pos) > 0) {
			return usagef("give KEY... or -stdin")
		}
		keys := f.pos
		if *useStdin {
			sc := newLineScanner(os.Stdin)
			for sc.Scan() {
				keys = append(keys, sc.Text())
			}
			if err := sc.Err(); err != nil {
				return err
			}
		}
		db, err := f.open(ctx, c, kv.Options{CacheBytes: 8 << 20})
		if err != nil {
			return err
		}
		defer db.Close()
		w, err := db.Begin(ctx)
		if err != nil {
			return err
		}
		defer w.Abort(ctx)
		for _, k := range keys {
			if err := w.Delete([]byte(k)); err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
		}
		return w.Commit(ctx)
	})
}

func cmdKVIterate(ctx context.Context, args []string) error {
	f := newKVFlags("iterate", "-db DIR [-count] [-prefix P] [-from K] [-to K]",
		"Print the keys in lexicographic (byte) order, one a line; -prefix, -from and -to\n(both inclusive) select a range. -count prints only how many there are.")
	count := f.Bool("count", false, "print the number of keys instead")
	prefix := f.String("prefix", "", "only keys starting with P")
	from := f.String("from", "", "only keys >= K")
	to := f.String("to", "", "only keys <= K")
	return f.run(ctx, args, func(c *client.Client) error {
		if len(f.pos) != 0 {
			return usagef("unexpected argument %q", f.pos[0])
		}
		var r kv.Range
		f.Visit(func(fl *flag.Flag) {
			switch fl.Name {
			case "prefix":
				r.Prefix = []byte(*prefix)
			case "from":
				r.From = []byte(*from)
			case "to":
				r.To = []byte(*to)
			}
		})
		db, err := f.open(ctx, c, kv.Options{})
		if err != nil {
			return err
		}
		defer db.Close()
		if *count {
			n, err := db.Count(r)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, n)
			return nil
		}
		out := bufio.NewWriterSize(stdout, 256<<10)
		it := db.Scan(r)
		defer it.Close()
		for it.Next() {
			out.Write(it.Key())
			out.WriteByte('\n')
		}
		if err := it.Err(); err != nil {
			return err
		}
		return out.Flush()
	})
}

func cmdKVVacuum(ctx context.Context, args []string) error {
	f := newKVFlags("vacuum", "-db DIR [-rep N]",
		"Rewrite the database compactly into a new file that replaces the old one atomically,\nreclaiming the space of replaced and deleted values. It counts as the writer; readers are\nnever blocked (they keep reading the old file until they refresh).")
	rep := f.intRange("rep", 0, 0, client.MaxReplication, "replication of the new file (0: keep)")
	return f.run(ctx, args, func(c *client.Client) error {
		if len(f.pos) != 0 {
			return usagef("unexpected argument %q", f.pos[0])
		}
		st, err := kv.Vacuum(ctx, c, f.db, kv.VacuumOptions{Rep: *rep})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "version %d: %d keys, %s -> %s (reclaimed %s)\n", st.Version, st.Keys,
			human(uint64(st.OldSize)), human(uint64(st.NewSize)), human(uint64(max(st.Reclaimed, 0))))
		return nil
	})
}

func cmdKVStat(ctx context.Context, args []string) error {
	f := newKVFlags("stat", "-db DIR", "Show the database's current version, keys, file size and garbage.")
	return f.run(ctx, args, func(c *client.Client) error {
		if len(f.pos) != 0 {
			return usagef("unexpected argument %q", f.pos[0])
		}
		db, err := f.open(ctx, c, kv.Options{CacheBytes: 1 << 20})
		if err != nil {
			return err
		}
		defer db.Close()
		st := db.Stats()
		fmt.Fprintf(stdout, "version:        %d\nkeys:           %d\nfile size:      %d\nlive bytes:     %d\ngarbage:        %d\nmax key length: %d\ncompactions:    %d\n",
			st.Version, st.Keys, st.FileSize, st.LiveBytes, st.Garbage, st.MaxKeyLength, st.Compactions)
		return nil
	})
}

func cmdKVServe(ctx context.Context, args []string) error {
	f := newKVFlags("serve", "-db DIR [-listen HOST:PORT] [-refresh DURATION] [-writable]",
		"Serve the database over HTTP/1.1 with keep-alive, on all cores:\n"+
			"  GET /KEY         the value (404 if absent), streamed; KEY is percent-decoded\n"+
			"  HEAD /KEY        Content-Length and X-KV-Version only\n"+
			"  POST /-/refresh  switch to the newest committed version now\n"+
			"  PUT /KEY, DELETE /KEY  with -writable: batched, each batch one transaction\n"+
			"The snapshot is also refreshed every -refresh. Lookups make no namenode request.\n"+
			"The first line printed is the address it listens on.")
	listen := f.String("listen", "127.0.0.1:8765", "address to listen on")
	refresh := f.durationRange("refresh", time.Second, 0, 24*time.Hour, "refresh the snapshot this often (0: only on POST /-/refresh)")
	writable := f.Bool("writable", false, "accept PUT and DELETE")
	batch := f.durationRange("batch-delay", 10*time.Millisecond, 0, time.Minute, "with -writable: how long a batch of writes collects requests")
	var cache int64 = 256 << 20
	f.sizeRange(&cache, "cache", 1<<20, 1<<40, "memory for cached blocks and index nodes")
	adminAddr := adminFlag(f.flags)
	return f.run(ctx, args, func(c *client.Client) error {
		if len(f.pos) != 0 {
			return usagef("unexpected argument %q", f.pos[0])
		}
		db, err := f.open(ctx, c, kv.Options{CacheBytes: cache})
		if err != nil {
			return err
		}
		defer db.Close()
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return err
		}
		reqs := metrics.NewRequests("kv", "HTTP requests served, by method.")
		dm, err := startAdmin(adminAddr, "kv serve", nil, logger("warn"), reqs)
		if err != nil {
			ln.Close()
			return err
		}
		defer dm.Close()
		srv := kv.NewServer(db, kv.ServerOptions{RefreshInterval: *refresh, Writable: *writable, BatchDelay: *batch, OnRequest: reqs.Inc})
		defer srv.Close()
		st := db.Stats()
		fmt.Fprintf(stdout, "listening on http://%s (%s: version %d, %d keys)\n", ln.Addr(), f.db, st.Version, st.Keys)
		if fl, ok := stdout.(interface{ Sync() error }); ok {
			fl.Sync()
		}
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
			return nil
		}
	})
}
