package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/connlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// LoopbackNetworks are the default open networks: clients there need no
// credential.
var LoopbackNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// AdminConfig configures a daemon's admin server.
type AdminConfig struct {
	// Addr is the address to listen on (host:port; port 0 picks one).
	Addr string
	// Name is the daemon's name, for log lines.
	Name string
	// Credential is the daemon's own: with it, clients outside the open
	// networks may connect over TLS with a client certificate of its CA.
	// Without it, only clients in the open networks are served.
	Credential *auth.Credential
	// Open lists the networks whose clients need no credential (default
	// LoopbackNetworks).
	Open []netip.Prefix
	Log  *slog.Logger
}

// Admin is a running admin server.
type Admin struct {
	// Mux serves the daemon's pages; /metrics is registered on it.
	Mux  *http.ServeMux
	addr net.Addr
	srv  *http.Server
	done chan error
}

// Addr is the address the admin server listens on.
func (a *Admin) Addr() string { return a.addr.String() }

// Close stops the admin server.
func (a *Admin) Close() error {
	err := a.srv.Close()
	<-a.done
	return err
}

// StartAdmin listens on cfg.Addr and serves /metrics from reg (and
// whatever the caller registers on the returned Admin's Mux) to the
// clients the access rule admits.
func StartAdmin(cfg AdminConfig, reg prometheus.Gatherer) (*Admin, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if len(cfg.Open) == 0 {
		cfg.Open = LoopbackNetworks
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("admin address %s: %w", cfg.Addr, err)
	}
	if cfg.Credential == nil && !allOpen(ln.Addr(), cfg.Open) {
		ln.Close()
		return nil, fmt.Errorf("admin address %s is not a loopback address: clients elsewhere must show a client certificate of the cluster, "+
			"which needs this daemon's credential (-credential); or listen on 127.0.0.1", cfg.Addr)
	}
	var tlsConf *tls.Config
	if cfg.Credential != nil {
		tlsConf = &tls.Config{
			Certificates: []tls.Certificate{cfg.Credential.Cert},
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    cfg.Credential.CA,
			MinVersion:   tls.VersionTLS13,
			NextProtos:   []string{"http/1.1"},
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(cfg.Log.Handler(), slog.LevelWarn)}))
	a := &Admin{Mux: mux, addr: ln.Addr(), done: make(chan error, 1)}
	guard := &accessRule{open: cfg.Open, tls: tlsConf != nil}
	a.srv = &http.Server{
		Handler:           guard.wrap(mux),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ErrorLog: slog.NewLogLogger(cfg.Log.Handler(), slog.LevelDebug),
	}
	go func() {
		err := connlimit.ServeHTTP(a.srv, &sniffListener{Listener: ln, tls: tlsConf},
			connlimit.Options{Name: cfg.Name + " admin", Log: cfg.Log, MaxOpen: 256})
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		a.done <- err
	}()
	cfg.Log.Info("admin server listening", "addr", a.Addr(), "metrics", "/metrics")
	return a, nil
}

// allOpen reports whether every client that can reach addr is in one of
// the open networks (addr is bound to an address inside them).
func allOpen(addr net.Addr, open []netip.Prefix) bool {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok || ip.IsUnspecified() {
		return false
	}
	return inNetworks(ip.Unmap(), open)
}

func inNetworks(ip netip.Addr, open []netip.Prefix) bool {
	for _, p := range open {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

type connKey struct{}

// accessRule admits clients in the open networks, and others that
// connected over TLS with a verified client certificate.
type accessRule struct {
	open []netip.Prefix
	tls  bool
}

// Allowed reports whether the request may be served, and if not why.
func (g *accessRule) allowed(r *http.Request) (bool, string) {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && inNetworks(ap.Addr().Unmap(), g.open) {
		return true, ""
	}
	if sc := sniffedConn(r.Context().Value(connKey{})); sc != nil && sc.verified() {
		return true, ""
	}
	if !g.tls {
		return false, "this admin port serves only clients on its own host"
	}
	return false, "clients from other hosts must connect over TLS (https) with a client certificate of the cluster"
}

func (g *accessRule) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, why := g.allowed(r); !ok {
			http.Error(w, "forbidden: "+why, http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// sniffedConn finds the sniffConn under c (through connlimit's wrapper).
func sniffedConn(v any) *sniffConn {
	c, _ := v.(net.Conn)
	for range 4 {
		switch x := c.(type) {
		case *sniffConn:
			return x
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}
