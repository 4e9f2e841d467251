package metrics

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// RecentLog keeps the last warnings and errors a daemon logged, for its
// status page. Its Handler wraps the daemon's log handler.
type RecentLog struct {
	mu   sync.Mutex
	ring []LogRecord
	next int // where the next record goes
	full bool
}

// LogRecord is one kept log record.
type LogRecord struct {
	Time    time.Time
	Level   string
	Message string
	Attrs   string // key=value pairs
}

// NewRecentLog keeps the last n records.
func NewRecentLog(n int) *RecentLog { return &RecentLog{ring: make([]LogRecord, n)} }

// Records returns the kept records, newest first.
func (l *RecentLog) Records() []LogRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []LogRecord
	n := l.next
	if l.full {
		n = len(l.ring)
	}
	for i := 1; i <= n; i++ {
		out = append(out, l.ring[(l.next-i+len(l.ring))%len(l.ring)])
	}
	return out
}

func (l *RecentLog) add(r LogRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.next] = r
	l.next = (l.next + 1) % len(l.ring)
	if l.next == 0 {
		l.full = true
	}
}

// Handler returns next, also keeping its records of level warn and above.
func (l *RecentLog) Handler(next slog.Handler) slog.Handler {
	return &recentHandler{next: next, log: l}
}

type recentHandler struct {
	next  slog.Handler
	log   *RecentLog
	attrs []slog.Attr // from WithAttrs (groups are flattened into keys)
	group string
}

func (h *recentHandler) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= slog.LevelWarn || h.next.Enabled(ctx, lv)
}

func (h *recentHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var b strings.Builder
		add := func(a slog.Attr) bool {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			if h.group != "" {
				b.WriteString(h.group + ".")
			}
			b.WriteString(a.Key + "=" + a.Value.String())
			return true
		}
		for _, a := range h.attrs {
			add(a)
		}
		r.Attrs(add)
		h.log.add(LogRecord{Time: r.Time, Level: r.Level.String(), Message: r.Message, Attrs: b.String()})
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *recentHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	c.next = h.next.WithAttrs(as)
	return &c
}

func (h *recentHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	c.next = h.next.WithGroup(name)
	return &c
}
