package cli

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/metrics"
	"github.com/plasmafs/plasma/internal/namenode"
	"github.com/plasmafs/plasma/internal/statuspage"
	"github.com/prometheus/client_golang/prometheus"
)

// recentLog keeps this process's recent warnings and errors (logger
// feeds it) for the namenode's status page.
var recentLog = metrics.NewRecentLog(64)

// adminFlags are a daemon's admin port flags.
type adminFlags struct {
	listen, open *string
}

// adminFlag adds -admin-listen and -admin-open to a daemon's flags.
func adminFlag(f *flags) adminFlags {
	return adminFlags{
		listen: f.String("admin-listen", "", "admin HTTP `address` serving /metrics (Prometheus text format) and status pages; a port\n"+
			"alone (:9100) listens on 127.0.0.1. Clients on loopback (see -admin-open) need no credential;\n"+
			"others must connect over TLS (https, same port) with a client certificate of the cluster. Empty: none"),
		open: f.String("admin-open", "127.0.0.0/8,::1/128", "networks (CIDR, comma-separated) whose clients the admin port serves without a credential"),
	}
}

// daemonMetrics is a daemon's metrics registry and admin server.
type daemonMetrics struct {
	Registry *prometheus.Registry
	admin    *metrics.Admin
}

// startAdmin starts a daemon's admin server on addr ("": none, and only
// the registry is made) serving its registry, which holds the runtime
// collectors and cs.
func startAdmin(af adminFlags, name string, cred *auth.Credential, log *slog.Logger, cs ...prometheus.Collector) (*daemonMetrics, error) {
	dm := &daemonMetrics{Registry: metrics.NewRegistry()}
	dm.Registry.MustRegister(cs...)
	addr := *af.listen
	if addr == "" {
		return dm, nil
	}
	var open []netip.Prefix
	for c := range strings.SplitSeq(*af.open, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, usagef("-admin-open %q: %v (want networks such as 127.0.0.0/8)", c, err)
		}
		open = append(open, p.Masked())
	}
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	a, err := metrics.StartAdmin(metrics.AdminConfig{Addr: addr, Name: name, Credential: cred, Open: open, Log: log}, dm.Registry)
	if err != nil {
		return nil, fmt.Errorf("%s: -admin-listen: %w", name, err)
	}
	dm.admin = a
	return dm, nil
}

// Close stops the admin server, if any.
func (dm *daemonMetrics) Close() {
	if dm != nil && dm.admin != nil {
		dm.admin.Close()
	}
}

// serveStatusPage adds the namenode's status page at / of its admin
// server; links lists datanodes' admin addresses by data address
// (DATAADDR=ADMINADDR, comma-separated).
func (dm *daemonMetrics) serveStatusPage(nn *namenode.Namenode, links string, stop <-chan struct{}) error {
	return dm.serveStatus(nn.Status, links, stop)
}

// serveStatus serves the status page of the namenode status describes.
func (dm *daemonMetrics) serveStatus(status func() namenode.Status, links string, stop <-chan struct{}) error {
	if dm.admin == nil {
		return nil
	}
	m := map[string]string{}
	for l := range strings.SplitSeq(links, ",") {
		if l == "" {
			continue
		}
		data, admin, ok := strings.Cut(l, "=")
		if !ok {
			return usagef("-datanode-admin %q: want DATAADDR=ADMINADDR", l)
		}
		m[data] = admin
	}
	p := statuspage.New(statuspage.Source{Status: status, Gatherer: dm.Registry, Recent: recentLog, DatanodeAdmin: m})
	go p.Run(stop, statuspage.SampleEvery)
	dm.admin.Mux.Handle("/", p)
	return nil
}

// logFormatFlag adds -log-format to a daemon's flags.
func logFormatFlag(f *flags) *string {
	return f.String("log-format", "text", "log format: text (key=value) or json (one JSON object a line, for log collectors)")
}

// daemonLogger is logger in the format a daemon's -log-format names; it
// also becomes the process's default logger, so what other packages log
// comes out the same way.
func daemonLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("-log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(os.Stderr, opts)
	case "json":
		h = slog.NewJSONHandler(os.Stderr, opts)
	default:
		return nil, usagef("-log-format %q: want text or json", format)
	}
	log := slog.New(recentLog.Handler(h))
	slog.SetDefault(log)
	return log, nil
}
