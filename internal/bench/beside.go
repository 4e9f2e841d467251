package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// A Reference is the report of the same benchmark run against a reference
// (a directory of the local filesystem, a loopback FUSE mount) in the same
// run.
type Reference struct {
	Name   string // what it ran on, e.g. "ext4 on /dev/loop0 (journaled) at /mnt/x"
	Report *Report
}

// Beside returns rep with every result set beside the same-named result of
// each reference (one row per reference, in order) and its ratio. Results
// no reference has stay alone. target names what rep ran on.
func Beside(rep *Report, target string, refs ...Reference) *Report {
	out := &Report{Bench: rep.Bench, Started: rep.Started, Params: rep.Params + "; ours: " + target}
	var names []string
	for _, ref := range refs {
		names = append(names, ref.Name)
	}
	if len(names) > 0 {
		out.Params += "; references: " + strings.Join(names, "; ")
	}
	for _, r := range rep.Results {
		found := false
		for _, ref := range refs {
			for _, x := range ref.Report.Results {
				if x.Name != r.Name || x.Unit != r.Unit {
					continue
				}
				res := r
				res.RefName, res.Ref, res.Ratio = ref.Name, x.Ours, 0
				if x.Note != "" && x.Note != r.Note {
					res.Note = strings.TrimPrefix(r.Note+"; reference: "+x.Note, "; ")
				}
				out.add(res)
				found = true
				break
			}
		}
		if !found {
			r.RefName = target
			out.add(r)
		}
	}
	return out
}

// DescribeDir names the filesystem dir is on, as a benchmark's report
// shows it: type, source and, for ext4, whether it has a journal, e.g.
// "ext4 on /dev/loop0 (journaled), /mnt/img/ref" or "fuse.plasma, /mnt/p".
func DescribeDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		abs = p
	}
	m, ok := mountOf(abs)
	if !ok {
		return abs
	}
	what := m.fstype
	switch {
	case m.fstype == "ext4" || m.fstype == "ext3":
		what += " on " + m.source
		// The mount options do not show the data mode; ext4's own list does
		// (data=ordered, journal or writeback), for a journaled one only.
		if b, err := os.ReadFile(filepath.Join("/proc/fs/ext4", filepath.Base(m.source), "options")); err == nil {
			if strings.Contains(string(b), "\ndata=") {
				what += " (journaled)"
			} else {
				what += " (no journal)"
			}
		}
	case strings.HasPrefix(m.fstype, "fuse."):
		if m.source != "" && m.source != strings.TrimPrefix(m.fstype, "fuse.") {
			what += " over " + m.source
		}
	case m.fstype != "tmpfs" && m.source != "" && m.source != "none":
		what += " on " + m.source
	}
	return what + ", " + abs
}

type mountEntry struct {
	dir, fstype, source string
}

// mountOf returns the mount holding path (the longest mountpoint prefix,
// the last mounted if several), from /proc/self/mountinfo.
func mountOf(path string) (mountEntry, bool) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return mountEntry{}, false
	}
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	var best mountEntry
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		f := strings.Fields(l)
		if len(f) < 7 {
			continue
		}
		mp := unescape.Replace(f[4])
		if !(path == mp || mp == "/" || strings.HasPrefix(path, mp+"/")) {
			continue
		}
		if found && len(mp) < len(best.dir) {
			continue
		}
		e := mountEntry{dir: mp}
		for i := 5; i+1 < len(f); i++ {
			if f[i] == "-" {
				e.fstype = f[i+1]
				if i+2 < len(f) {
					e.source = unescape.Replace(f[i+2])
				}
				break
			}
		}
		best, found = e, true
	}
	return best, found
}

// ServeLoopback mounts go-fuse's loopback example filesystem (fs.NewLoopbackRoot
// with the example's options: 1 s entry and attribute timeouts) of orig on
// mnt, says "mounted" on ready, and serves until ctx ends; then it
// unmounts. It is the reference for what FUSE itself costs: a FUSE
// filesystem over the same local filesystem cannot beat it.
func ServeLoopback(ctx context.Context, orig, mnt string, ready io.Writer) error {
	root, err := fs.NewLoopbackRoot(orig)
	if err != nil {
		return err
	}
	sec := time.Second
	opts := &fs.Options{
		AttrTimeout:     &sec,
		EntryTimeout:    &sec,
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true, // mount(2), as plasma mount does: no fusermount needed
			FsName:            orig,
			Name:              "loopback",
		},
	}
	srv, err := fs.Mount(mnt, root, opts)
	if err != nil {
		return fmt.Errorf("loopback mount of %s on %s: %w", orig, mnt, err)
	}
	fmt.Fprintln(ready, "mounted")
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	if err := srv.Unmount(); err != nil {
		syscall.Unmount(mnt, syscall.MNT_DETACH)
	}
	return nil
}

// A Loopback is go-fuse's loopback filesystem of a local directory, served
// by its own process ('plasma-bench fuse-loopback') as the PlasmaFS mount
// is, and mounted at Dir.
type Loopback struct {
	Dir, Orig string
	cmd       *exec.Cmd
	exited    chan struct{}
}

// StartLoopback mounts the loopback filesystem of orig (created if missing)
// on a new temporary directory; Stop unmounts it.
func StartLoopback(orig string) (*Loopback, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(orig, 0o755); err != nil {
		return nil, err
	}
	if orig, err = filepath.Abs(orig); err != nil {
		return nil, err
	}
	mnt, err := os.MkdirTemp("", "plasma-bench-loopback-")
	if err != nil {
		return nil, err
	}
	l := &Loopback{Dir: mnt, Orig: orig, exited: make(chan struct{})}
	l.cmd = exec.Command(self, "fuse-loopback", orig, mnt)
	l.cmd.Stderr = os.Stderr
	out, err := l.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches us; we stop it
	if err := l.cmd.Start(); err != nil {
		os.Remove(mnt)
		return nil, err
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	go func() { io.Copy(io.Discard, out); l.cmd.Wait(); close(l.exited) }()
	if strings.TrimSpace(line) != "mounted" {
		<-l.exited
		os.Remove(mnt)
		return nil, errors.New("the loopback FUSE process did not mount (see its messages above)")
	}
	return l, nil
}

// Stop unmounts the loopback filesystem and ends its process.
func (l *Loopback) Stop() error {
	l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.exited:
	case <-time.After(30 * time.Second):
		l.cmd.Process.Kill()
		<-l.exited
	}
	if m, ok := mountOf(l.Dir); ok && m.dir == l.Dir {
		syscall.Unmount(l.Dir, syscall.MNT_DETACH)
	}
	return os.Remove(l.Dir)
}
