package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/connlimit"
	"github.com/plasmafs/plasma/internal/metrics"
	"github.com/plasmafs/plasma/internal/nfsbridge"
	"github.com/plasmafs/plasma/internal/webhdfs"
)

const webhdfsArgs = "-listen HOST:PORT [-trusted-proxies ADDR,NET/BITS,...] [-tls-cert FILE -tls-key FILE] [-idle-timeout D] [-max-upload SIZE] [-admin-listen ADDR]"

func init() {
	register("webhdfs", webhdfsArgs, "serve PlasmaFS over Hadoop's WebHDFS REST API (Spark, hadoop fs, fsspec, curl)", cmdWebHDFS)
}

func cmdWebHDFS(ctx context.Context, args []string) error {
	f := newFlags("webhdfs", webhdfsArgs,
		"Serve PlasmaFS under http://HOST:PORT/webhdfs/v1/ with Hadoop's WebHDFS REST API, so that Hadoop's\n"+
			"webhdfs:// file system (Spark, hadoop fs), Python's fsspec and hdfs packages and curl reach it.\n"+
			"Every request is one PlasmaFS transaction; CREATE and APPEND answer 307 to this gateway with\n"+
			"data=true, and the upload that follows commits only when its whole body has arrived.\n\n"+
			"Who a request is for: the user of a client certificate issued by the cluster CA (with -tls-cert,\n"+
			"over https), or the user.name= of Hadoop's pseudo authentication, which is believed only from\n"+
			"this machine and the -trusted-proxies addresses: from anywhere else it is refused, since anyone\n"+
			"can claim any name. The gateway acts for its users as the NFS bridge does: it needs a superuser\n"+
			"credential, makes new files theirs and checks their permissions with the namenode's rules.", true)
	listen := f.String("listen", "127.0.0.1:9870", "address to listen on")
	trusted := f.String("trusted-proxies", "", "comma-separated addresses and networks (CIDR) whose user.name is believed, besides loopback")
	certFile := f.String("tls-cert", "", "serve https with this server certificate (PEM); client certificates are verified against the cluster CA")
	keyFile := f.String("tls-key", "", "the key of -tls-cert (PEM)")
	idle := f.durationRange("idle-timeout", webhdfs.DefaultIdleTimeout, time.Second, time.Hour, "give up on an upload or download that stalls this long")
	var maxUpload int64
	f.sizeRange(&maxUpload, "max-upload", 0, 1<<50, "largest CREATE or APPEND body (0: no limit)")
	adminAddr := adminFlag(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if err := needArgs(f, 0, 0); err != nil {
		return err
	}
	if (*certFile == "") != (*keyFile == "") {
		return usagef("-tls-cert and -tls-key go together")
	}
	opt := webhdfs.Options{IdleTimeout: *idle, MaxUpload: maxUpload}
	if *trusted != "" {
		l, err := nfsbridge.ParseClients(*trusted)
		if err != nil {
			return usagef("-trusted-proxies: %v", err)
		}
		opt.Trusted = l
	}
	cred, credErr := gatewayCredential(f)
	var tlsConf *tls.Config
	if *certFile != "" {
		var err error
		if tlsConf, err = webhdfsTLS(cred, credErr, *certFile, *keyFile); err != nil {
			return err
		}
		opt.Cluster = cred.Identity.Cluster
	}
	// The admin port's TLS clients are checked against the same cluster
	// CA as the gateway's (without a credential it serves loopback only).
	var adminCred *auth.Credential
	if credErr == nil {
		adminCred = cred
	}
	reqs := metrics.NewRequests("webhdfs", "WebHDFS requests received, by operation (other: no WebHDFS operation).")
	dm, err := startAdmin(adminAddr, "webhdfs", adminCred, logger("warn"), reqs)
	if err != nil {
		return err
	}
	defer dm.Close()
	opt.OnRequest = reqs.Inc
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	srv := webhdfs.New(c, opt).Server()
	srv.TLSConfig = tlsConf
	srv.ConnState = connlimit.ConnState
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("-listen %s: %w", *listen, err)
	}
	// The accept path of every server (internal/connlimit), under TLS so
	// that a connection's handshake counts as its wait for a first request
	// and net/http still sees the *tls.Conn.
	var l net.Listener = connlimit.Listen(ln, connlimit.Options{Name: "webhdfs"})
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
		l = tls.NewListener(l, tlsConf)
	}
	who := "pseudo authentication (user.name) from loopback"
	if *trusted != "" {
		who += " and " + opt.Trusted.String()
	}
	if tlsConf != nil {
		who = "client certificates of the cluster CA; " + who
	}
	fmt.Fprintf(stdout, "plasma: WebHDFS identities: %s\n", who)
	if note := webhdfsCredentialNote(cred); note != "" {
		fmt.Fprintln(stdout, "plasma: note: "+note)
	}
	fmt.Fprintf(stdout, "plasma: serving WebHDFS on %s://%s%s/\n", scheme, l.Addr(), webhdfs.Prefix)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// gatewayCredential loads the credential of the cluster entry the gateway
// connects with (nil, without an error, at security level none: there is
// no credential file).
func gatewayCredential(f *flags) (*auth.Credential, error) {
	cfg, err := client.LoadConfig(f.cluster, f.namenodes)
	if err != nil || cfg.CredentialFile == "" {
		return nil, err
	}
	return auth.LoadCredential(cfg.CredentialFile)
}

// webhdfsTLS returns the gateway's TLS configuration: its server
// certificate, and client certificates verified (when given) against the
// CA of cred, the cluster credential the gateway connects with (credErr:
// why it could not be loaded).
func webhdfsTLS(cred *auth.Credential, credErr error, certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert %s / -tls-key %s: %w", certFile, keyFile, err)
	}
	if credErr != nil {
		return nil, credErr
	}
	if cred == nil {
		return nil, usagef("-tls-cert needs the cluster CA to verify client certificates: give the gateway a credential ($PLASMAFS_CREDENTIAL or the cluster entry in ~/.plasmafs)")
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    cred.CA,
		ClientAuth:   tls.VerifyClientCertIfGiven,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// webhdfsCredentialNote says what follows from a gateway credential that
// is not a superuser's ("" for a superuser's, or without a credential).
func webhdfsCredentialNote(cred *auth.Credential) string {
	if cred == nil || cred.Identity.Super() {
		return ""
	}
	return fmt.Sprintf("the gateway's credential (%s) is not a superuser's: what its users create belongs to %s, "+
		"and they may do only what %s may as well", cred.Identity.User, cred.Identity.User, cred.Identity.User)
}
