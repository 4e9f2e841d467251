package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
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
	"github.com/plasmafs/plasma/internal/units"
	"golang.org/x/sys/unix"
)

func init() {
	register("namenode", "[-listen ADDR] [-db STORE] [-log FILE] [-format] [-cluster NAME] [-blocksize B] | backup -db FILE -o COPY | migrate -from STORE -to STORE", "run the metadata server (-format: create a new namespace); back up a stopped one's metadata; copy it to another store", cmdNamenode)
	register("datanode init", "-dir DIR [-cluster NAME] [-blocksize B] [-size BYTES]", "create a datanode volume (config + data file: sparse by default)", cmdDatanodeInit)
	register("datanode", "-dir DIR [-listen ADDR] -namenode ADDR", "serve a datanode volume", cmdDatanode)
}

// parseSize and sizeString are the sizes every flag and job file takes
// (internal/units).
var (
	parseSize  = units.ParseSize
	sizeString = units.FormatSize
)

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

// sizeRangeFlag is a sizeFlag accepting only min..max bytes.
type sizeRangeFlag struct {
	v        *int64
	min, max int64
}

func (s sizeRangeFlag) String() string { return sizeFlag{s.v}.String() }

func (s sizeRangeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	if n < s.min || n > s.max {
		return fmt.Errorf("must be from %s to %s", sizeString(s.min), sizeString(s.max))
	}
	*s.v = n
	return nil
}

// maxVolume bounds a datanode volume's size on the command line (the space
// actually free is checked before anything is written).
const maxVolume = 1 << 60

// checkSpace refuses a volume of size bytes in dir when the filesystem that
// would hold it has less space free.
func checkSpace(dir string, size int64) error {
	d := dir
	for {
		var st unix.Statfs_t
		err := unix.Statfs(d, &st)
		if err == nil {
			if free := st.Bavail * uint64(st.Bsize); uint64(size) > free {
				return fmt.Errorf("%s: a volume of %s does not fit: %s free on that filesystem", dir, human(uint64(size)), human(free))
			}
			return nil
		}
		parent := filepath.Dir(d)
		if !errors.Is(err, fs.ErrNotExist) || parent == d {
			return nil // let the creation itself report the problem
		}
		d = parent
	}
}

func logger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(recentLog.Handler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})))
}

func cmdNamenode(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "backup" {
		return cmdNamenodeBackup(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "migrate" {
		return cmdNamenodeMigrate(ctx, args[1:])
	}
	f := newFlags("namenode", "[options]", `Run the PlasmaFS namenode (metadata server). Its metadata store is a SQLite file
or a PostgreSQL database (-db postgres://user@host/db, with -log naming the
commit log, a local file); 'plasma namenode migrate' copies between them.`, false)
	listen := f.String("listen", "127.0.0.1:2730", "address to serve clients and datanodes on")
	db := f.String("db", "namenode.db", "metadata store: a SQLite database file (with its -wal and -shm files), or a URL\n(sqlite:///path/namenode.db, postgres://user@host:5432/db?sslmode=disable; the engines: "+strings.Join(meta.Engines(), ", ")+")")
	upgrade := f.Bool("upgrade", false, "migrate a PostgreSQL database of an older schema version to this program's (back it up first;\nSQLite files are migrated at every start)")
	logFlag := f.String("log", "", "commit log file (default: the SQLite database's path + \".log\"; required for a store\nthat is not a local file)")
	format := f.Bool("format", false, "create a new, empty namespace in -db, which must not exist yet (without it, a missing database is refused)")
	acceptLostWAL := f.Bool("accept-lost-wal", false, "start from a database that was not closed cleanly although its -wal file is gone, losing the commits it held")
	cluster := f.String("cluster", "plasma", "cluster name; datanodes of other clusters are refused")
	var bs int64 = 1 << 20
	f.sizeRange(&bs, "blocksize", 64<<10, 64<<20, "filesystem blocksize, a power of two")
	relaxed := f.Bool("relaxed", false, "acknowledge commits before fsync; a power cut loses at most the commits of the last -sync-interval or -sync-commits, never corrupts")
	syncInterval := f.durationRange("sync-interval", time.Second, time.Millisecond, time.Hour, "relaxed mode: make acknowledged commits durable at least this often")
	syncCommits := f.intRange("sync-commits", 1000, 1, 1<<30, "relaxed mode: make acknowledged commits durable after this many")
	// Datanodes forget revocations after a day, so no ticket may live longer.
	ticketLifetime := f.durationRange("ticket-lifetime", time.Hour, 2*time.Second, 24*time.Hour, "lifetime of datanode tickets (clients refresh them before expiry)")
	userAlloc := f.intRange("user-alloc-limit", 0, 0, 1<<40, "blocks (replicas counted) one user may hold in uncommitted transactions, counted in bytes\n(on sparse volumes a short block counts its pages); 0: seven eighths of the cluster's capacity")
	journalSettle := f.durationRange("journal-settle", 50*time.Millisecond, time.Millisecond, 24*time.Hour, "journaled small appends (clients' PLASMAFS_JOURNAL_SMALL_WRITES): how long their datanodes'\nbackground sync waits to gather more; until then a crash has them replayed from the commit log")
	var logSize int64 = 64 << 20
	f.sizeRange(&logSize, "log-size", 64<<10, 1<<40, "commit log: preallocated size, and how much is logged before the log is checkpointed into the database and started over")
	maxConns := f.intRange("max-conns", 4096, 16, 1<<20, "client connections (daemons and superusers may use 64 more)")
	maxUserConns := f.intRange("max-conns-per-user", 256, 1, 1<<20, "connections of one user (not daemons or superusers)")
	maxHandshakes := f.intRange("max-handshakes-per-source", 64, 1, 1<<20, "connections from one address still in their handshake")
	var requestMem int64 = 64 << 20
	f.sizeRange(&requestMem, "request-memory", 16<<20, 1<<40, "memory for requests arriving, all connections together")
	rep := f.intRange("rep", 1, 1, 16, "default replication")
	txnTimeout := f.durationRange("txn-timeout", 10*time.Minute, time.Second, 24*time.Hour, "abort transactions idle this long")
	leaseTerm := f.durationRange("lease-term", namenode.DefaultLeaseTerm, 10*time.Millisecond, time.Minute, "length of the directory leases mounts take to answer lookups of missing names\nthemselves; others' creates in a leased directory may wait this long. Before\nshortening it, stop the namenode for at least the old term")
	hb := f.durationRange("heartbeat-timeout", 10*time.Second, 100*time.Millisecond, time.Hour, "declare a datanode dead after this long without heartbeat")
	deadAfter := f.durationRange("dead-after", 10*time.Minute, time.Second, 30*24*time.Hour, "replace the replicas of a datanode dead this long by copies on the others\n(until then they count: it may come back)")
	copies := f.intRange("copies-per-node", 2, 1, 64, "re-replication copies (of up to 32 blocks) a datanode takes part in at a time")
	level := f.String("log-level", "info", "log level (debug, info, warn, error)")
	logFormat := logFormatFlag(f)
	secFlag := f.String("security", "privacy", "security level of client and datanode connections: none, auth, integrity or privacy")
	dataSecFlag := f.String("data-security", "", "security level the namenode uses on datanodes' data ports to have them copy blocks\n(default: -security)")
	credFile := f.String("credential", "", "the namenode's credential (needed above level none)")
	ticketKey := f.String("ticket-key", "", "file with the key shared with the datanodes for tickets")
	delegFile := f.String("delegation-credential", "", "the namenode's delegation certificate (`file`), with which it signs the short-lived\ncredentials a user's MapReduce jobs run with on task servers (none: jobs cannot use task servers)")
	adminAddr := adminFlag(f)
	dnAdmin := f.String("datanode-admin", "", "admin addresses of datanodes, for links on the status page: DATAADDR=ADMINADDR,...")
	grp := groupFlags(f) // namenodegroup.go
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
	dataSec := sec
	if *dataSecFlag != "" {
		if dataSec, err = auth.ParseLevel(*dataSecFlag); err != nil {
			return usagef("-data-security: %v", err)
		}
	}
	cred, tk, err := loadDaemonSecrets(*credFile, *ticketKey)
	if err != nil {
		return err
	}
	var deleg *auth.Delegator
	if *delegFile != "" {
		if deleg, err = auth.LoadDelegator(*delegFile); err != nil {
			return fmt.Errorf("-delegation-credential: %w", err)
		}
	}
	if bs&(bs-1) != 0 {
		return usagef("blocksize %d: must be a power of two from 64K to 64M", bs)
	}
	if grp.enabled() && *format {
		return usagef("-format with -peers would give each member a namespace of its own: format one database without -peers, then give every member a copy ('plasma namenode backup')")
	}
	member, err := grp.resolve(f, *listen) // namenodegroup.go
	if err != nil {
		return err
	}
	logPath := *logFlag
	if logPath == "" {
		local := meta.LocalPath(*db)
		if local == "" {
			return usagef("-db %s is not a local file: name the commit log with -log", *db)
		}
		logPath = local + ".log"
	}
	if _, err := os.Stat(logPath); err == nil && *format {
		return fmt.Errorf("%s exists: it is the commit log of another namespace; move it away before formatting a new one", logPath)
	}
	store, err := meta.Open(ctx, *db, meta.OpenOptions{Relaxed: *relaxed, Format: *format || grp.createsDB(*db), AcceptLostWAL: *acceptLostWAL, Upgrade: *upgrade})
	if err != nil {
		return err
	}
	storeFailed := false
	defer func() {
		if !storeFailed {
			store.Close()
		}
	}()
	if meta.LocalPath(*db) == "" {
		if err := checkLogNamespace(logPath, store, *db, *format); err != nil {
			return err
		}
	}
	if ns, ok := store.(meta.Namespacer); ok && *format {
		fmt.Fprintf(stderr, "namenode: formatted a new namespace %s in %s\n", ns.Namespace(), meta.Redact(*db))
	}
	log, err := daemonLogger(*level, *logFormat)
	if err != nil {
		return err
	}
	nnCfg := namenode.Config{Cluster: *cluster, Blocksize: uint32(bs), Store: store, Fresh: *format, TxnTimeout: *txnTimeout,
		LeaseTerm: *leaseTerm, HeartbeatTimeout: *hb, DeadAfter: *deadAfter, CopiesPerNode: *copies, DataSecurity: dataSec, DefaultRep: uint8(*rep), Logger: log, Security: sec, Credential: cred, TicketKey: tk, Delegator: deleg,
		TicketLifetime: *ticketLifetime, UserAllocLimit: uint64(*userAlloc),
		MaxConns: *maxConns, MaxConnsPerUser: *maxUserConns, MaxHandshakesPerSource: *maxHandshakes, RequestMemory: int(requestMem), Relaxed: *relaxed, NoMetrics: *adminAddr.listen == "", LogPath: logPath, LogSize: logSize, SyncInterval: *syncInterval, SyncCommits: *syncCommits, JournalSettle: *journalSettle}
	if grp.enabled() {
		failed, err := runGroupMember(ctx, grp, member, *db, logPath, nnCfg, adminAddr, *dnAdmin)
		storeFailed = failed
		return err
	}
	nn, err := namenode.New(nnCfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		nn.Close()
		return fmt.Errorf("namenode: %w", err)
	}
	dm, err := startAdmin(adminAddr, "namenode", cred, log, nn.Collector())
	if err != nil {
		ln.Close()
		nn.Close()
		return err
	}
	defer dm.Close()
	pageStop := make(chan struct{})
	defer close(pageStop)
	if err := dm.serveStatusPage(nn, *dnAdmin, pageStop); err != nil {
		ln.Close()
		nn.Close()
		return err
	}
	log.Info("namenode serving", "addr", ln.Addr().String(), "cluster", *cluster, "blocksize", bs, "db", meta.Redact(*db), "relaxed", *relaxed)
	errc := make(chan error, 1)
	go func() { errc <- nn.Serve(ln) }()
	select {
	case <-ctx.Done():
		log.Info("namenode stopping")
		nn.Close()
		return nil
	case err := <-errc:
		if errors.Is(err, namenode.ErrStoreFailed) {
			// The store's state is unknown: the namenode and the store
			// are left as a crash would leave them, and the process
			// exits; a restart reloads what is durable.
			storeFailed = true
			return err
		}
		nn.Close()
		return err
	}
}

func cmdDatanodeInit(ctx context.Context, args []string) error {
	f := newFlags("datanode init", "-dir DIR [options]", `Create a datanode volume: a new identity, a config file and a data file.
A sparse volume (the default) has a slot for every -slot-bytes of its size in a sparse
data file: a block takes only the pages its data covers, so small files cost what they
hold; a deleted whole block's pages stay for the next whole block (counted as free, written
over once space runs short). A fixed volume (-layout fixed, or -fallocate) has one
preallocated slot per whole block: every block, however short, takes a block of the volume.`, false)
	dir := f.String("dir", "", "volume directory (required)")
	cluster := f.String("cluster", "plasma", "cluster name")
	var bs int64 = 1 << 20
	var size int64 = 4 << 30
	f.sizeRange(&bs, "blocksize", 4<<10, 64<<20, "blocksize, a power of two (must match the namenode)")
	f.sizeRange(&size, "size", 4<<10, maxVolume, "volume size in bytes (e.g. 4G)")
	fast := f.Bool("fallocate", false, "a fixed volume, its space reserved with fallocate instead of writing zeros (instant, but first writes are slower on ext4)")
	layout := f.String("layout", "sparse", "sparse (blocks take the pages they hold) or fixed (a whole preallocated block each)")
	var slotBytes int64 = datanode.DefaultSlotBytes
	f.sizeRange(&slotBytes, "slot-bytes", 4<<10, 64<<20, "sparse volumes: one slot per this many bytes of -size (each slot costs the datanode 16 bytes of memory\nand of disk; a volume of only large files may take fewer)")
	if err := f.parse(args); err != nil {
		return err
	}
	if *dir == "" && len(f.pos) > 0 {
		*dir, f.pos = f.pos[0], f.pos[1:]
	}
	if *dir == "" {
		return usagef("-dir is required")
	}
	if len(f.pos) != 0 {
		return usagef("unexpected argument %q (the volume directory is -dir %s)", f.pos[0], *dir)
	}
	if bs&(bs-1) != 0 {
		return usagef("blocksize %d: must be a power of two", bs)
	}
	// Flags of the other layout would be ignored: refuse them.
	layoutSet, slotsSet := false, false
	f.Visit(func(fl *flag.Flag) {
		layoutSet = layoutSet || fl.Name == "layout"
		slotsSet = slotsSet || fl.Name == "slot-bytes"
	})
	if *fast && layoutSet && *layout == "sparse" {
		return usagef("-fallocate makes a fixed volume: give -layout fixed, or leave -fallocate out for a sparse one")
	}
	if slotsSet && (*fast || *layout == "fixed") {
		return usagef("-slot-bytes is for sparse volumes: a fixed volume has one slot per block")
	}
	if size < bs {
		return usagef("-size %s is smaller than one block (%s)", sizeString(size), sizeString(bs))
	}
	if *layout != "sparse" && *layout != "fixed" {
		return usagef("-layout %q: sparse or fixed", *layout)
	}
	if slotBytes > bs {
		return usagef("-slot-bytes %s is larger than a block (%s)", sizeString(slotBytes), sizeString(bs))
	}
	if err := checkSpace(*dir, size); err != nil {
		return err
	}
	if *layout == "sparse" && !*fast {
		cfg, err := datanode.InitSparse(*dir, *cluster, uint32(bs), size, slotBytes)
		if err != nil {
			return fmt.Errorf("init %s: %w", *dir, err)
		}
		fmt.Fprintf(stdout, "datanode volume %s: identity %s, cluster %s, sparse, %s in %d slots of blocks of %d bytes\n", *dir, cfg.Identity, cfg.Cluster, human(uint64(cfg.Capacity)), cfg.Blocks, cfg.Blocksize)
		return nil
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
	hb := f.durationRange("heartbeat", time.Second, 10*time.Millisecond, time.Minute, "heartbeat interval")
	level := f.String("log-level", "info", "log level")
	logFormat := logFormatFlag(f)
	secFlag := f.String("security", "auth", "security level of data connections: none, auth, integrity or privacy")
	nnSecFlag := f.String("namenode-security", "privacy", "security level of the namenode connection")
	credFile := f.String("credential", "", "the datanode's credential (needed above level none)")
	ticketKey := f.String("ticket-key", "", "file with the ticket key shared with the namenode (without it, tickets are not checked)")
	var receiveMem int64 = 1 << 30
	f.sizeRange(&receiveMem, "receive-memory", 1<<20, 1<<40, "memory for write data received and not yet stored, all connections together (at least four blocks)")
	adminAddr := adminFlag(f)
	scrubEvery := f.durationRange("scrub-interval", 7*24*time.Hour, 0, 365*24*time.Hour, "start a pass of the scrubber, which checks every block's checksum and reports damaged\nones to the namenode, this often (0: no scrubbing)")
	var scrubRate int64 = 8 << 20
	f.sizeRange(&scrubRate, "scrub-rate", 64<<10, 1<<40, "bytes a second the scrubber reads at most (a few percent of a disk's bandwidth)")
	var copyRate int64
	f.sizeRange(&copyRate, "copy-rate", 0, 1<<40, "bytes a second this datanode sends for re-replication, all copies together, so\nuser reads keep their share of the disk and network; at least one block a second, more\nthan a copy task (up to 32 blocks per -copies-per-node) needs to end within 2 minutes (0: no bound)")
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
	log, err := daemonLogger(*level, *logFormat)
	if err != nil {
		return err
	}
	srv, err := datanode.Open(datanode.Config{Dir: *dir, Namenode: *nnAddr, Heartbeat: *hb, Logger: log,
		Security: sec, NamenodeSecurity: nnSec, Credential: cred, TicketKey: tk, ReceiveMemory: int(receiveMem),
		ScrubInterval: *scrubEvery, ScrubRate: scrubRate, CopyRate: copyRate})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		srv.Close()
		return fmt.Errorf("datanode: %w", err)
	}
	dm, err := startAdmin(adminAddr, "datanode", cred, log, srv.Collector())
	if err != nil {
		ln.Close()
		srv.Close()
		return err
	}
	defer dm.Close()
	addr := ln.Addr().String()
	sock := filepath.Join(*dir, "dn.sock")
	local, err := srv.ListenLocal(sock)
	if err != nil {
		ln.Close()
		srv.Close()
		return fmt.Errorf("datanode: local socket: %w", err)
	}
	if err := srv.Register(ctx, addr, sock); err != nil {
		ln.Close()
		srv.Close()
		if ctx.Err() != nil {
			return nil // stopped while waiting for the namenode
		}
		return err
	}
	log.Info("datanode serving", "addr", addr, "identity", srv.Store().Config.Identity, "dir", *dir)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	go func() {
		if err := srv.ServeLocal(local); err != nil && !errors.Is(err, net.ErrClosed) {
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

// cmdNamenodeBackup copies the metadata of a stopped namenode (a running
// one is backed up with 'plasma admin backup').
func cmdNamenodeBackup(ctx context.Context, args []string) error {
	f := newFlags("namenode backup", "-db FILE -o COPY", `Write a consistent copy of a namenode's metadata database (with what its -wal
file holds) to the new file COPY, without a namenode running. A running
namenode is backed up with 'plasma admin backup'. To restore: stop the
namenode, remove FILE-wal, FILE-shm and FILE.log, and copy COPY to FILE.`, false)
	db := f.String("db", "namenode.db", "the namenode's SQLite metadata database")
	out := f.String("o", "", "the copy to write (must not exist)")
	acceptLostWAL := f.Bool("accept-lost-wal", false, "copy a database whose -wal file is gone although it was not closed cleanly")
	if err := f.parse(args); err != nil {
		return err
	}
	if *out == "" && len(f.pos) == 1 {
		*out = f.pos[0]
	} else if len(f.pos) != 0 {
		return usagef("unexpected argument %q", f.pos[0])
	}
	if *out == "" {
		return usagef("-o COPY is required")
	}
	if strings.Contains(*db, "://") && meta.LocalPath(*db) == "" {
		return usagef("-db %s: a PostgreSQL store is backed up with pg_dump (see README, \"PostgreSQL as the metadata store\")", meta.Redact(*db))
	}
	// Commits still only in the commit log go into the store first (the
	// namenode is stopped; it would replay them itself at its next start).
	logPath := *db + ".log"
	_, logErr := os.Stat(logPath)
	store, err := meta.OpenSQLiteWith(*db, meta.SQLiteOptions{ReadOnly: logErr != nil, AcceptLostWAL: *acceptLostWAL})
	if err != nil {
		return err
	}
	defer store.Close()
	if logErr == nil {
		if err := namenode.ReplayLog(store, logPath); err != nil {
			return err
		}
	}
	if err := store.Backup(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "metadata of namespace %s (%s) written to %s\n", store.Namespace(), *db, *out)
	return nil
}

// formatNewCluster creates the namespace of a new local cluster in db,
// unless it exists. A cluster directory that has datanode volumes but no
// database is refused: a new namespace would not hold their files (and
// the volumes would refuse to join it).
func formatNewCluster(db, dir string, datanodes int) error {
	if _, err := os.Stat(db); err == nil {
		return nil
	}
	if err := refuseVolumesWithoutNamespace(db, dir, datanodes); err != nil {
		return err
	}
	store, err := meta.OpenSQLiteWith(db, meta.SQLiteOptions{Format: true})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "new namespace %s in %s\n", store.Namespace(), db)
	return store.Close()
}

// refuseVolumesWithoutNamespace refuses to format a new namespace in db
// for a cluster directory that has datanode volumes: a new namespace would
// not hold their files (and the volumes would refuse to join it).
func refuseVolumesWithoutNamespace(db, dir string, datanodes int) error {
	restore := "restore the database or a backup of it"
	if meta.LocalPath(db) != "" {
		restore = "restore the database (with its -wal file) or a backup of it"
	}
	for i := 1; i <= datanodes; i++ {
		vol := filepath.Join(dir, fmt.Sprintf("dn%d", i))
		if _, err := os.Stat(filepath.Join(vol, "config")); err == nil {
			return fmt.Errorf("%s has datanode volumes (%s) but no namenode database %s: %s; "+
				"or remove %s to start a new, empty cluster", dir, vol, meta.Redact(db), restore, dir)
		}
	}
	return nil
}
