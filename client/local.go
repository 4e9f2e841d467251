package client

import (
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/wire"
)

// localFiles holds block files of datanodes on this machine, obtained from
// the datanode over its Unix socket, for short-circuit reads.
type localFiles struct {
	mu     sync.Mutex
	files  map[string]*os.File // by identity
	failed map[string]bool
}

// localFile returns the block file of datanode n if it runs on this host.
func (c *Client) localFile(n wire.NodeInfo) *os.File {
	if c.cfg.NoShortCircuit || n.Socket == "" || n.Host != c.host {
		return nil
	}
	lf := &c.local
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if f := lf.files[n.Identity]; f != nil {
		return f
	}
	if lf.failed[n.Identity] {
		return nil
	}
	f, err := fetchFD(n.Socket, n.Identity)
	if err != nil {
		if lf.failed == nil {
			lf.failed = map[string]bool{}
		}
		lf.failed[n.Identity] = true
		return nil
	}
	if lf.files == nil {
		lf.files = map[string]*os.File{}
	}
	lf.files[n.Identity] = f
	return f
}

func fetchFD(sock, identity string) (*os.File, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	buf := make([]byte, 256)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("no descriptor from %s", sock)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, fmt.Errorf("no descriptor from %s", sock)
	}
	f := os.NewFile(uintptr(fds[0]), sock)
	if string(buf[:n]) != identity {
		f.Close()
		return nil, fmt.Errorf("%s serves volume %s, expected %s", sock, buf[:n], identity)
	}
	return f, nil
}

func (lf *localFiles) close() {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	for _, f := range lf.files {
		f.Close()
	}
	lf.files = nil
}
