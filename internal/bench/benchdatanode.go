package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/plasmafs/plasma/client"
)

// startBenchDatanode gives a benchmark's namenodes one datanode on a
// 64 MiB volume in dir/vol, logging to logf, and waits up to wait until
// the cluster of cfg counts it live: a create needs a live datanode (the
// file's replication), though empty files store nothing on it. The
// datanode is returned, started, with any error, for the caller to stop.
func startBenchDatanode(ctx context.Context, plasma, dir string, namenodes []string, cfg client.Config, logf *os.File, wait time.Duration) (*exec.Cmd, error) {
	vol := filepath.Join(dir, "vol")
	if out, err := exec.Command(plasma, "datanode", "init", "-fallocate", "-dir", vol, "-cluster", benchCluster, "-blocksize", benchBlocksize, "-size", "64M").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("datanode init: %v: %s", err, out)
	}
	addr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	dn := exec.Command(plasma, "datanode", "-dir", vol, "-listen", addr, "-namenode", strings.Join(namenodes, ","), "-security", "none", "-namenode-security", "none", "-log-level", "warn")
	dn.Stdout, dn.Stderr = logf, logf
	if err := dn.Start(); err != nil {
		return nil, fmt.Errorf("start the datanode: %w", err)
	}
	for deadline := time.Now().Add(wait); ; {
		c, err := client.New(ctx, cfg)
		if err == nil {
			var st client.FsStat
			st, err = c.FsStat(ctx)
			c.Close()
			if err == nil && st.LiveDatanodes == 1 {
				return dn, nil
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			return dn, fmt.Errorf("no live datanode after %v (%v):\n%s", wait, err, log)
		}
		time.Sleep(20 * time.Millisecond) // waiting for processes to start
	}
}
