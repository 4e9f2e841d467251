package clustertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/lossyfs"
	"github.com/plasmafs/plasma/internal/meta"
)

// PowerCutProcs is a cluster of real processes (as Start makes) whose
// namenode database and datanode volumes live on a lossyfs mount, so that
// PowerCut loses everything they did not fsync. Secrets, credentials and
// logs stay on the ordinary disk.
type PowerCutProcs struct {
	*Procs
	// FS is the current mount (a new one after each PowerCut).
	FS *lossyfs.FS
	// Disk is the backing directory: what survives a power cut.
	Disk string
	// Mnt is where FS is mounted.
	Mnt  string
	vols int
}

// StartPowerCut starts a namenode and o.Datanodes datanodes with their
// state on a lossyfs mount and waits until every datanode is registered.
// It needs root (FUSE); as another user the test is skipped.
func StartPowerCut(t testing.TB, o Options) *PowerCutProcs {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("power-cut tests need root (a FUSE mount); CI runs as root")
	}
	o.defaults()
	dir := t.TempDir()
	pc := &PowerCutProcs{Disk: filepath.Join(dir, "disk"), Mnt: filepath.Join(dir, "mnt")}
	for _, d := range []string{pc.Disk, pc.Mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if pc.FS, err = lossyfs.Mount(pc.Disk, pc.Mnt); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the processes stop before the unmount.
	t.Cleanup(func() {
		if err := pc.FS.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", pc.Mnt, err)
		}
	})
	// The last -db wins: the database goes on the mount. A database
	// on a server (PostgreSQL) is another machine's, which keeps running
	// through the cut: then the namenode's commit log goes on the mount.
	if remoteStore(o.NamenodeArgs) {
		o.NamenodeArgs = append(append([]string(nil), o.NamenodeArgs...), "-log", filepath.Join(pc.Mnt, "namenode.log"))
	} else {
		o.NamenodeArgs = append(append([]string(nil), o.NamenodeArgs...), "-db", filepath.Join(pc.Mnt, "namenode.db"))
	}
	c := &Procs{t: t, Opts: o, Dir: dir, Bin: Binary(t)}
	pc.Procs = c
	c.NN = &Proc{Addr: FreeAddr(t), Dir: pc.Mnt, Log: filepath.Join(dir, "namenode.log")}
	if c.Secrets, err = auth.InitSecrets(filepath.Join(dir, "secrets"), o.Cluster); err != nil {
		t.Fatalf("secrets: %v", err)
	}
	c.AdminCred = c.IssueCredential("admin", auth.RoleSuperuser)
	t.Cleanup(c.stopAll)
	for i := 0; i < o.Datanodes; i++ {
		c.DNs = append(c.DNs, pc.initVolume())
	}
	c.StartNamenode()
	for _, p := range c.DNs {
		c.StartDatanode(p)
	}
	c.WaitLive(len(c.DNs))
	return pc
}

// initVolume creates a datanode volume on the mount and makes it durable.
func (pc *PowerCutProcs) initVolume() *Proc {
	pc.t.Helper()
	pc.vols++
	name := fmt.Sprintf("vol%d", pc.vols)
	p := &Proc{Addr: FreeAddr(pc.t), Dir: filepath.Join(pc.Mnt, name), Log: filepath.Join(pc.Dir, name+".log")}
	args := append([]string{"datanode", "init"}, pc.Opts.initLayoutArgs()...)
	out, code := pc.Run(nil, append(args, "-dir", p.Dir, "-cluster", pc.Opts.Cluster,
		"-blocksize", strconv.FormatInt(pc.Opts.Blocksize, 10), "-size", strconv.FormatInt(pc.Opts.Size, 10))...)
	if code != 0 {
		pc.t.Fatalf("datanode init: %s", out)
	}
	// As an operator would run sync(1) after setting up a volume. Needed:
	// 'datanode init' renames its config file into place without
	// fsyncing it, so a power cut right after init can leave it empty.
	if err := pc.FS.Sync(); err != nil {
		pc.t.Fatal(err)
	}
	return p
}

// AddDatanode initialises a new volume on the mount and starts a datanode
// on it.
func (pc *PowerCutProcs) AddDatanode() *Proc {
	pc.t.Helper()
	p := pc.initVolume()
	pc.DNs = append(pc.DNs, p)
	pc.StartDatanode(p)
	return p
}

// PowerCut kills every process with SIGKILL, cuts the power of the
// filesystem (every write not fsynced is lost), mounts the disk again and
// restarts the namenode and every datanode on their addresses and
// volumes, and waits until all datanodes are registered. Clients from
// before the cut see their connections break.
func (pc *PowerCutProcs) PowerCut() {
	pc.t.Helper()
	for _, p := range append([]*Proc{pc.NN}, pc.DNs...) {
		if p.Running() {
			pc.Kill(p)
		}
	}
	if err := pc.FS.Cut(); err != nil {
		pc.t.Fatalf("power cut: %v", err)
	}
	fs, err := lossyfs.Mount(pc.Disk, pc.Mnt)
	if err != nil {
		pc.t.Fatalf("mount after the power cut: %v", err)
	}
	pc.FS = fs
	pc.StartNamenode()
	for _, p := range pc.DNs {
		pc.StartDatanode(p)
	}
	pc.WaitLive(len(pc.DNs))
}

// remoteStore reports whether namenode arguments name a metadata store
// that is not a local file (a postgres:// URL).
func remoteStore(args []string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "-db" && meta.LocalPath(args[i+1]) == "" {
			return true
		}
	}
	return false
}
