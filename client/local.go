package client

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/wire"
)

// localFiles holds block files of datanodes on this machine, obtained from
// the datanode over its Unix socket, for short-circuit reads and writes.
// Reads use a read-only descriptor; the writable one is asked for only
// when this client writes there (with a write ticket).
type localFiles struct {
	mu       sync.Mutex
	files    map[string]*os.File // read-only, by identity
	writable map[string]*os.File // read-write, by identity
	failed   map[string]bool     // no short-circuit to this datanode
}

// Requests of the datanode's local protocol (internal/datanode/local.go).
const (
	localRead    = 'R'
	localWrite   = 'W'
	localRefused = '!'
)

// isLocal reports whether datanode n runs on this host with a socket.
func (c *Client) isLocal(n wire.NodeInfo) bool {
	return !c.cfg.NoShortCircuit && n.Socket != "" && n.Host == c.host
}

// localFile returns a read-only descriptor of the block file of datanode n
// if it runs on this host.
func (c *Client) localFile(n wire.NodeInfo) *os.File {
	if !c.isLocal(n) {
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
	f, err := fetchFD(n.Socket, n.Identity, []byte{localRead})
	if err != nil {
		lf.fail(n.Identity)
		return nil
	}
	if lf.files == nil {
		lf.files = map[string]*os.File{}
	}
	lf.files[n.Identity] = f
	return f
}

// localWriteFile returns a writable descriptor of the block file of
// datanode n if it runs on this host; the datanode hands it out only
// against a write ticket (here: for block) on it. Without one (nil), or if
// the datanode refuses, the client writes over the socket.
func (c *Client) localWriteFile(n wire.NodeInfo, block uint64, ticket []byte) *os.File {
	if !c.isLocal(n) || len(ticket) > 0xffff {
		return nil
	}
	lf := &c.local
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if f := lf.writable[n.Identity]; f != nil {
		return f
	}
	if lf.failed[n.Identity] {
		return nil
	}
	req := []byte{localWrite}
	req = binary.LittleEndian.AppendUint64(req, block)
	req = binary.LittleEndian.AppendUint16(req, uint16(len(ticket)))
	f, err := fetchFD(n.Socket, n.Identity, append(req, ticket...))
	if err != nil {
		// A refused ticket may be fresher next time; an unreachable
		// socket is not retried.
		if !errors.Is(err, errLocalRefused) {
			lf.fail(n.Identity)
		}
		return nil
	}
	if lf.writable == nil {
		lf.writable = map[string]*os.File{}
	}
	lf.writable[n.Identity] = f
	return f
}

var errLocalRefused = errors.New("datanode refused the descriptor")

func (lf *localFiles) fail(identity string) {
	if lf.failed == nil {
		lf.failed = map[string]bool{}
	}
	lf.failed[identity] = true
}

// fetchFD sends req on the datanode's socket and receives the block file's
// descriptor.
func fetchFD(sock, identity string, req []byte) (*os.File, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	if oobn == 0 {
		if n > 0 && buf[0] == localRefused {
			return nil, fmt.Errorf("%w: %s: %s", errLocalRefused, sock, buf[1:n])
		}
		return nil, fmt.Errorf("no descriptor from %s", sock)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("no descriptor from %s", sock)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
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
	for _, f := range lf.writable {
		f.Close()
	}
	lf.files, lf.writable = nil, nil
}
