package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/plasmafs/plasma/internal/metrics"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/fusefs"
	"github.com/plasmafs/plasma/internal/vfs"
)

func init() {
	register("mount", "[-o ro,allow_other,sync,...] [-detach] [-log FILE] MOUNTPOINT", "mount PlasmaFS with FUSE (needs root); Ctrl-C, SIGTERM or 'plasma umount' unmounts", cmdMount)
	register("umount", "[-f] MOUNTPOINT", "unmount a FUSE mount (-f: also a stale one whose mount process died)", cmdUmount)
}

// mountReadyFD is set in the environment of the mount process started by
// 'plasma mount -detach': the descriptor on which it reports "ok" or why
// the mount failed.
const mountReadyFD = "PLASMA_MOUNT_READY_FD"

// mountOptions parses -o values (comma-separated, repeatable).
func mountOptions(list []string) (vfs.Options, fusefs.Options, error) {
	var vo vfs.Options
	var fo fusefs.Options
	for _, l := range list {
		for _, o := range strings.Split(l, ",") {
			k, val, hasVal := strings.Cut(strings.TrimSpace(o), "=")
			switch k {
			case "":
			case "ro":
				vo.ReadOnly = true
			case "rw":
				vo.ReadOnly = false
			case "sync":
				vo.Sync = true
			case "async":
				vo.Sync = false
			case "allow_other":
				fo.AllowOther = true
			case "default_permissions":
				fo.DefaultPermissions = true
			case "debug":
				fo.Debug = true
			case "fsname":
				fo.FsName = val
			case "rep":
				n, err := strconv.Atoi(val)
				if err != nil || n < 1 || n > 16 || !hasVal {
					return vo, fo, usagef("-o rep=N: N must be 1..16")
				}
				vo.Rep = n
			case "ttl":
				d, err := time.ParseDuration(val)
				if err != nil || !hasVal || d > time.Hour {
					return vo, fo, usagef("-o ttl=DURATION: a duration up to 1h (0 turns caching off)")
				}
				if d == 0 {
					d = -1
				}
				vo.TTL = d
			default:
				return vo, fo, usagef("unknown mount option %q (ro, rw, sync, async, allow_other, default_permissions, debug, fsname=NAME, rep=N, ttl=DURATION)", k)
			}
		}
	}
	return vo, fo, nil
}

func cmdMount(ctx context.Context, args []string) error {
	f := newFlags("mount", "[-o ro,allow_other,sync,...] [-detach] [-log FILE] MOUNTPOINT",
		"Mount PlasmaFS on MOUNTPOINT with FUSE (needs root). Metadata operations commit asynchronously\n"+
			"(durable within the namenode's window); file data commits at close and fsync; fsync returns once\n"+
			"everything before it is durable; -o sync makes every operation durable before it returns.\n"+
			"Runs until Ctrl-C, SIGTERM or 'plasma umount MOUNTPOINT' (-detach: in the background).\n"+
			"A MOUNTPOINT on which a filesystem is mounted already is refused (exit status 1).", true)
	var opts multiFlag
	f.Var(&opts, "o", "mount options, comma-separated: ro, sync, allow_other, default_permissions, debug, fsname=NAME, rep=N, ttl=DURATION")
	detach := f.Bool("detach", false, "mount in the background and return once mounted")
	logFile := f.String("log", "", "with -detach: write the mount process's messages to this file")
	adminAddr := adminFlag(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if err := needArgs(f, 1, 1); err != nil {
		return err
	}
	vo, fo, err := mountOptions(opts)
	if err != nil {
		return err
	}
	mp, err := filepath.Abs(f.pos[0])
	if err != nil {
		return err
	}
	if err := notMountedAt(mp); err != nil {
		return err
	}
	if st, err := os.Stat(mp); err != nil {
		return err
	} else if !st.IsDir() {
		return fmt.Errorf("%s: not a directory", mp)
	}
	if *detach {
		return mountDetached(args, mp, *logFile)
	}
	ready := func(err error) {}
	if fd := os.Getenv(mountReadyFD); fd != "" {
		os.Unsetenv(mountReadyFD)
		n, _ := strconv.Atoi(fd)
		rf := os.NewFile(uintptr(n), "ready")
		ready = func(err error) {
			if rf == nil {
				return
			}
			if err != nil {
				fmt.Fprintf(rf, "%s", oneLine(err))
			} else {
				fmt.Fprintf(rf, "ok")
			}
			rf.Close()
			rf = nil
		}
		defer ready(fmt.Errorf("mount process ended"))
	}
	c, err := f.connect(ctx)
	if err != nil {
		ready(err)
		return err
	}
	defer c.Close()
	ops := metrics.NewRequests("mount", "FUSE operations served, by operation.")
	dm, err := startAdmin(adminAddr, "mount", nil, logger("warn"), ops)
	if err != nil {
		ready(err)
		return err
	}
	defer dm.Close()
	fo.OnOp = ops.Inc
	vo.Owner = selfOwner(f)
	v := vfs.New(c, vo)
	srv, err := fusefs.Mount(mp, v, fo)
	if err != nil {
		v.Close()
		err = fmt.Errorf("mount %s: %w", mp, err)
		ready(err)
		return err
	}
	fmt.Fprintf(stdout, "plasma: mounted %s\n", mp)
	ready(nil)
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		if err := srv.Unmount(); err != nil {
			// Busy: detach it; users of open files get errors from now on.
			fmt.Fprintf(stderr, "plasma mount: unmount %s: %v; detaching it\n", mp, err)
			fusefs.Unmount(mp, true)
		} else {
			<-done
		}
	}
	if err := v.Close(); err != nil {
		return fmt.Errorf("unmounted %s, but data of files still open was lost: %w", mp, err)
	}
	return nil
}

// notMountedAt refuses a mountpoint on which a filesystem is mounted
// already: a second mount would hide the first (and stack on it).
func notMountedAt(mp string) error {
	real := mp
	if r, err := filepath.EvalSymlinks(mp); err == nil {
		real = r
	}
	plasma, other := plasmaMountType(real)
	switch {
	case plasma:
		if _, err := os.Stat(real); errors.Is(err, syscall.ENOTCONN) {
			return fmt.Errorf("%s is the mount point of a PlasmaFS mount whose process ended: clear it with 'plasma umount -f %s' first", mp, mp)
		}
		return fmt.Errorf("%s is already a mount point (PlasmaFS is mounted there): unmount it first ('plasma umount %s') or choose another directory", mp, mp)
	case other != "":
		return fmt.Errorf("%s is already a mount point (a %s filesystem): unmount it first or choose another directory", mp, other)
	}
	return nil
}

// mountDetached starts 'plasma mount' (without -detach) in a new session
// and returns once it reports the mount ready, or why it failed.
func mountDetached(args []string, mp, logFile string) error {
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-detach" || a == "--detach" || a == "-detach=true" || a == "--detach=true":
		case a == "-log" || a == "--log":
			i++
		case strings.HasPrefix(a, "-log=") || strings.HasPrefix(a, "--log="):
		default:
			rest = append(rest, a)
		}
	}
	out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if logFile != "" {
		out, err = os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	}
	if err != nil {
		return err
	}
	defer out.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, append([]string{"mount"}, rest...)...)
	cmd.Env = append(os.Environ(), mountReadyFD+"=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	w.Close()
	msg, _ := io.ReadAll(r)
	r.Close()
	if string(msg) != "ok" {
		cmd.Wait()
		if len(msg) == 0 {
			msg = []byte("mount process exited")
		}
		return fmt.Errorf("%s", msg)
	}
	fmt.Fprintf(stdout, "plasma: mounted %s (process %d)\n", mp, cmd.Process.Pid)
	cmd.Process.Release()
	return nil
}

func cmdUmount(ctx context.Context, args []string) error {
	f := newFlags("umount", "[-f] MOUNTPOINT", "Unmount a PlasmaFS FUSE mount; the mount process then exits. -f also clears a\n"+
		"stale mount whose process died (kill -9), detaching it lazily if needed.", false)
	force := f.Bool("f", false, "force: detach a stale or busy mount")
	if err := f.parse(args); err != nil {
		return err
	}
	if err := needArgs(f, 1, 1); err != nil {
		return err
	}
	return fusefs.Unmount(f.pos[0], *force)
}

// selfOwner maps the PlasmaFS user and group the mount or bridge acts as
// (its credential's) to the local user and group running it.
func selfOwner(f *flags) *vfs.Owner {
	cfg, err := client.LoadConfig(f.cluster, f.namenodes)
	if err != nil {
		return nil
	}
	u, g := cfg.User, cfg.Group
	if cfg.CredentialFile != "" {
		if cred, err := auth.LoadCredential(cfg.CredentialFile); err == nil {
			u, g = cred.Identity.User, cred.Identity.PrimaryGroup()
		}
	}
	if u == "" {
		cu, err := user.Current()
		if err != nil {
			return nil
		}
		u = cu.Username
	}
	if g == "" {
		g = u
	}
	return &vfs.Owner{User: u, Group: g, UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}
}
