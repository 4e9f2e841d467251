package meta

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// OpenOptions say how a store is opened; an engine ignores what does not
// apply to it.
type OpenOptions = SQLiteOptions

// Engine opens the store a URL names.
type Engine func(ctx context.Context, u *url.URL, o OpenOptions) (Store, error)

var (
	enginesMu sync.RWMutex
	engines   = map[string]Engine{}
)

// Register makes an engine available to Open under a URL scheme, as
// database/sql drivers register themselves. SQLite registers "sqlite".
func Register(scheme string, e Engine) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if _, dup := engines[scheme]; dup {
		panic("meta: engine registered twice: " + scheme)
	}
	engines[scheme] = e
}

// Open opens the metadata store at location: a URL whose scheme names the
// engine (sqlite:///var/lib/plasma/namenode.db), or a plain file path,
// which means SQLite.
func Open(ctx context.Context, location string, o OpenOptions) (Store, error) {
	u, err := storeURL(location)
	if err != nil {
		return nil, err
	}
	enginesMu.RLock()
	e := engines[u.Scheme]
	enginesMu.RUnlock()
	if e == nil {
		return nil, fmt.Errorf("metadata store %s: no engine for %q (known: %s)", location, u.Scheme, strings.Join(Engines(), ", "))
	}
	return e(ctx, u, o)
}

// Engines lists the registered URL schemes.
func Engines() []string {
	enginesMu.RLock()
	defer enginesMu.RUnlock()
	var out []string
	for s := range engines {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// LocalPath returns the file a store location names if its engine keeps
// the store in one local file (SQLite), else "". The namenode keeps its
// commit log beside that file.
func LocalPath(location string) string {
	u, err := storeURL(location)
	if err != nil || u.Scheme != "sqlite" {
		return ""
	}
	return u.Path
}

func storeURL(location string) (*url.URL, error) {
	if !strings.Contains(location, "://") {
		return &url.URL{Scheme: "sqlite", Path: location}, nil
	}
	u, err := url.Parse(location)
	if err != nil {
		return nil, fmt.Errorf("metadata store %q: %w", location, err)
	}
	return u, nil
}

func init() {
	Register("sqlite", func(ctx context.Context, u *url.URL, o OpenOptions) (Store, error) {
		if u.Host != "" || u.Path == "" {
			return nil, fmt.Errorf("metadata store %s: a SQLite URL names a local file: sqlite:///path/to/namenode.db", u.Redacted())
		}
		return OpenSQLiteWith(u.Path, o)
	})
}

// Redact returns a store location fit for messages: a URL without its
// password.
func Redact(location string) string {
	u, err := storeURL(location)
	if err != nil || u.Scheme == "sqlite" && !strings.Contains(location, "://") {
		return location
	}
	return u.Redacted()
}
