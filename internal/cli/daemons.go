package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/datanode"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/namenode"
)

func init() {
	register("namenode", "[-listen ADDR] [-db FILE] [-cluster NAME] [-blocksize B]", "run the metadata server", cmdNamenode)
	register("datanode init", "-dir DIR [-cluster NAME] [-blocksize B] [-size BYTES]", "create a datanode volume (config + preallocated data file)", cmdDatanodeInit)
	register("datanode", "-dir DIR [-listen ADDR] -namenode ADDR", "serve a datanode volume", cmdDatanode)
}

// parseSize parses sizes such as 1048576, 64K, 1M, 4G.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	u := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s, "B"), "i"))
	if u != "" {
		switch u[len(u)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			u = u[:len(u)-1]
		}
	}
	v, err := strconv.ParseInt(u, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q (use e.g. 65536, 64K, 1M, 4G)", s)
	}
	return v * mult, nil
}

type sizeFlag struct{ v *int64 }

func (s sizeFlag) String() string {
	if s.v == nil {
		return ""
	}
	return strconv.FormatInt(*s.v, 10)
}
func (s sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s.v = n
	return nil
}

func logger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

func cmdNamenode(ctx context.Context, args []string) error {
	f := newFlags("namenode", "[options]", "Run the PlasmaFS namenode (metadata server, SQLite store).", false)
	listen := f.String("listen", "127.0.0.1:2730", "address to serve clients and datanodes on")
	db := f.String("db", "namenode.db", "SQLite metadata database file (created if missing)")
	cluster := f.String("cluster", "plasma", "cluster name; datanodes of other clusters are refused")
	var bs int64 = 1 << 20
	f.Var(sizeFlag{&bs}, "blocksize", "filesystem blocksize (64K..64M)")
	relaxed := f.Bool("relaxed", false, "acknowledge commits before fsync; a power cut loses at most the commits of the last -sync-interval or -sync-commits, never corrupts")
	syncInterval := f.Duration("sync-interval", time.Second, "relaxed mode: make acknowledged commits durable at least this often")
	syncCommits := f.Int("sync-commits", 1000, "relaxed mode: make acknowledged commits durable after this many")
	ticketLifetime := f.Duration("ticket-lifetime", time.Hour, "lifetime of datanode tickets (clients refresh them before expiry)")
	rep := f.Int("rep", 1, "default replication")
	txnTimeout := f.Duration("txn-timeout", 10*time.Minute, "abort transactions idle this long")
	hb := f.Duration("heartbeat-timeout", 10*time.Second, "declare a datanode dead after this long without heartbeat")
	level := f.String("log-level", "info", "log level (debug, info, warn, error)")
	secFlag := f.String("security", "privacy", "security level of client and datanode connections: none, auth or privacy")
	credFile := f.String("credential", "", "the namenode's credential (needed above level none)")
	ticketKey := f.String("ticket-key", "", "file with the key shared with the datanodes for tickets")
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.pos) != 0 {
		return usagef("unexpected argument %q", f.pos[0])
	}
	sec, err := auth.ParseLevel(*secFlag)
	if err != nil {
		return usagef("%v", err)
	}
	cred, tk, err := loadDaemonSecrets(*credFile, *ticketKey)
	if err != nil {
		return err
	}
	if bs < 64<<10 || bs > 64<<20 || bs&(bs-1) != 0 {
		return usagef("blocksize %d: must be a power of two from 64K to 64M", bs)
	}
	if *syncInterval <= 0 || *syncCommits < 1 {
		return usagef("-sync-interval and -sync-commits must be positive")
	}
	if *ticketLifetime < 2*time.Second {
		return usagef("-ticket-lifetime %v: at least 2s (tickets carry whole seconds)", *ticketLifetime)
	}
	if *rep < 1 || *rep > 16 {
		return usagef("default replication %d: must be 1..16", *rep)
	}
	store, err := meta.OpenSQLite(*db, *relaxed)
	if err != nil {
		return err
	}
	defer store.Close()
	log := logger(*level)
	nn, err := namenode.New(namenode.Config{Cluster: *cluster, Blocksize: uint32(bs), Store: store, TxnTimeout: *txnTimeout,
		HeartbeatTimeout: *hb, DefaultRep: uint8(*rep), Logger: log, Security: sec, Credential: cred, TicketKey: tk,
		TicketLifetime: *ticketLifetime, Relaxed: *relaxed, SyncInterval: *syncInterval, SyncCommits: *syncCommits})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		nn.Close()
		return fmt.Errorf("namenode: %w", err)
	}
	log.Info("namenode serving", "addr", ln.Addr().String(), "cluster", *cluster, "blocksize", bs, "db", *db, "relaxed", *relaxed)
	errc := make(chan error, 1)
	go func() { errc <- nn.Serve(ln) }()
	select {
	case <-ctx.Done():
		log.Info("namenode stopping")
		nn.Close()
		return nil
	case err := <-errc:
		nn.Close()
		return err
	}
}

func cmdDatanodeInit(ctx context.Context, args []string) error {
	f := newFlags("datanode init", "-dir DIR [options]", "Create a datanode volume: a new identity, a config file and a preallocated data file.", false)
	dir := f.String("dir", "", "volume directory (required)")
	cluster := f.String("cluster", "plasma", "cluster name")
	var bs int64 = 1 << 20
	var size int64 = 4 << 30
	f.Var(sizeFlag{&bs}, "blocksize", "blocksize (must match the namenode)")
	f.Var(sizeFlag{&size}, "size", "volume size in bytes (e.g. 4G)")
	fast := f.Bool("fallocate", false, "reserve space with fallocate instead of writing zeros (instant, but first writes are slower on ext4)")
	if err := f.parse(args); err != nil {
		return err
	}
	if *dir == "" {
		if len(f.pos) == 1 {
			*dir = f.pos[0]
		} else {
			return usagef("-dir is required")
		}
	}
	how := datanode.PreallocZero
	if *fast {
		how = datanode.PreallocFallocate
	} else {
		fmt.Fprintf(stdout, "preparing datanode volume %s: writing %s of zeros (use -fallocate to skip)...\n", *dir, human(uint64(size)))
	}
	cfg, err := datanode.InitWith(*dir, *cluster, uint32(bs), size, how)
	if err != nil {
		return fmt.Errorf("init %s: %w", *dir, err)
	}
	fmt.Fprintf(stdout, "datanode volume %s: identity %s, cluster %s, %d blocks of %d bytes\n", *dir, cfg.Identity, cfg.Cluster, cfg.Blocks, cfg.Blocksize)
	return nil
}

func cmdDatanode(ctx context.Context, args []string) error {
	f := newFlags("datanode", "-dir DIR -namenode ADDR [options]", "Serve a datanode volume and register it with the namenode.", false)
	dir := f.String("dir", "", "volume directory (created by 'plasma datanode init')")
	listen := f.String("listen", "127.0.0.1:2728", "data protocol address")
	nnAddr := f.String("namenode", "127.0.0.1:2730", "namenode address")
	hb := f.Duration("heartbeat", time.Second, "heartbeat interval")
	level := f.String("log-level", "info", "log level")
	secFlag := f.String("security", "auth", "security level of data connections: none, auth or privacy")
	nnSecFlag := f.String("namenode-security", "privacy", "security level of the namenode connection")
	credFile := f.String("credential", "", "the datanode's credential (needed above level none)")
	ticketKey := f.String("ticket-key", "", "file with the ticket key shared with the namenode (without it, tickets are not checked)")
	if err := f.parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return usagef("-dir is required")
	}
	sec, err := auth.ParseLevel(*secFlag)
	if err != nil {
		return usagef("%v", err)
	}
	nnSec, err := auth.ParseLevel(*nnSecFlag)
	if err != nil {
		return usagef("%v", err)
	}
	cred, tk, err := loadDaemonSecrets(*credFile, *ticketKey)
	if err != nil {
		return err
	}
	log := logger(*level)
	srv, err := datanode.Open(datanode.Config{Dir: *dir, Namenode: *nnAddr, Heartbeat: *hb, Logger: log,
		Security: sec, NamenodeSecurity: nnSec, Credential: cred, TicketKey: tk})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		srv.Close()
		return fmt.Errorf("datanode: %w", err)
	}
	addr := ln.Addr().String()
	sock := filepath.Join(*dir, "dn.sock")
	if err := srv.Register(ctx, addr, sock); err != nil {
		ln.Close()
		srv.Close()
		return err
	}
	log.Info("datanode serving", "addr", addr, "identity", srv.Store().Config.Identity, "dir", *dir)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	go func() {
		if err := srv.ServeLocal(sock); err != nil && !errors.Is(err, net.ErrClosed) {
			errc <- err
		}
	}()
	select {
	case <-ctx.Done():
		log.Info("datanode stopping")
		return srv.Close()
	case err := <-errc:
		srv.Close()
		return err
	}
}

func loadDaemonSecrets(credFile, ticketFile string) (*auth.Credential, []byte, error) {
	var cred *auth.Credential
	var tk []byte
	var err error
	if credFile != "" {
		if cred, err = auth.LoadCredential(credFile); err != nil {
			return nil, nil, err
		}
	}
	if ticketFile != "" {
		if tk, err = os.ReadFile(ticketFile); err != nil {
			return nil, nil, fmt.Errorf("ticket key: %w", err)
		}
	}
	return cred, tk, nil
}
