package datanode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/plasmafs/plasma/internal/connlimit"
	"golang.org/x/sys/unix"
)

// Local short-circuit protocol on the Unix socket. The client sends one
// request and gets one answer, then the connection closes:
//
//	'R'                                  a read-only descriptor of the block file
//	'W' block (8 bytes LE) len (2 bytes LE) ticket
//	                                     a read-write descriptor, for clients
//	                                     that write blocks themselves (DataAdopt);
//	                                     only with a write ticket for this datanode
//
// The answer is the volume identity with the descriptor (SCM_RIGHTS), or
// LocalRefused followed by the reason, without a descriptor.
const (
	LocalRead    = 'R'
	LocalWrite   = 'W'
	LocalRefused = '!'
)

// ListenLocal and ServeLocal let clients on this machine read (and write) blocks without
// a TCP copy: each connection on the Unix socket at path receives the
// volume identity and a descriptor of the block file, which the client
// then uses with pread (pwrite), verifying checksums itself.
//
// Trust rule: only a peer running as the datanode's own user (or root)
// gets a descriptor. Such a process could open the block file (0600, owned
// by that user) anyway, so the descriptor gives it nothing it does not
// have; the boundary is the OS user. Run datanodes under a dedicated user
// that no PlasmaFS user's processes share. Readers get a read-only
// descriptor; a writable one needs a write ticket for this datanode (that
// keeps a reader's bug from writing, it is no barrier against that user).
//
// ListenLocal creates the socket at path before the datanode registers
// (the namenode tells clients the path at once, so it must exist by
// then); ServeLocal then answers on it.
func (s *Server) ListenLocal(path string) (*LocalListener, error) {
	// A second, read-only open of the block file for readers.
	ro, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(s.store.data.Fd())), os.O_RDONLY, 0)
	if err != nil {
		if ro, err = os.Open(s.store.data.Name()); err != nil {
			return nil, fmt.Errorf("read-only block file: %w", err)
		}
	}
	os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		ro.Close()
		return nil, err
	}
	s.mu.Lock()
	s.uln = ln
	s.mu.Unlock()
	return &LocalListener{ln: ln, ro: ro}, nil
}

// LocalListener is the local socket of ListenLocal with the read-only
// block file it hands out.
type LocalListener struct {
	ln *net.UnixListener
	ro *os.File
}

// ServeLocal answers local peers on ll until the server closes.
func (s *Server) ServeLocal(ll *LocalListener) error {
	ln, ro := ll.ln, ll.ro
	defer ro.Close()
	l := connlimit.Listen(ln, connlimit.Options{Name: "datanode local socket", Log: s.log})
	for {
		nc, err := l.Accept()
		if err != nil {
			return nil // closed: Accept retries every other error
		}
		c := nc.(*connlimit.Conn).NetConn().(*net.UnixConn)
		// Only a peer that could open the block file itself (root or the
		// datanode's own user) gets its descriptor.
		if !s.trustedPeer(c) {
			s.log.Warn("local reader refused: different user", "peer", c.RemoteAddr())
		} else {
			s.serveLocalConn(c, ro)
		}
		nc.Close() // gives the listener's slot back
	}
}

// serveLocalConn answers one request of a trusted local peer.
func (s *Server) serveLocalConn(c *net.UnixConn, ro *os.File) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	var op [1]byte
	if _, err := io.ReadFull(c, op[:]); err != nil {
		return
	}
	var f *os.File
	switch op[0] {
	case LocalRead:
		f = ro
	case LocalWrite:
		var hdr [10]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		block := binary.LittleEndian.Uint64(hdr[:8])
		ticket := make([]byte, binary.LittleEndian.Uint16(hdr[8:]))
		if _, err := io.ReadFull(c, ticket); err != nil {
			return
		}
		if _, err := s.checkTicket(ticket, block, 1, true); err != nil {
			c.Write([]byte(fmt.Sprintf("%cwritable block file refused: %v", LocalRefused, err)))
			return
		}
		f = s.store.data
	default:
		c.Write([]byte(fmt.Sprintf("%cunknown request %q", LocalRefused, op[0])))
		return
	}
	rights := unix.UnixRights(int(f.Fd()))
	if _, _, err := c.WriteMsgUnix([]byte(s.store.Config.Identity), rights, nil); err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Warn("local reader handshake failed", "err", err)
	}
}

func (s *Server) trustedPeer(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil || cred == nil {
		return false
	}
	return cred.Uid == 0 || int(cred.Uid) == os.Getuid()
}
