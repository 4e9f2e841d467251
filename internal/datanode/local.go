package datanode

import (
	"errors"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// ServeLocal lets clients on this machine read blocks without a TCP copy:
// each connection on the Unix socket at path receives the volume identity
// and the block file's descriptor (SCM_RIGHTS), which the client then reads
// with pread, verifying checksums itself.
func (s *Server) ServeLocal(path string) error {
	os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.uln = ln
	s.mu.Unlock()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			select {
			case <-s.stop:
				return nil
			default:
			}
			return err
		}
		// Only a peer that could open the block file itself (root or the
		// datanode's own user) gets its descriptor.
		if !s.trustedPeer(c) {
			s.log.Warn("local reader refused: different user", "peer", c.RemoteAddr())
			c.Close()
			continue
		}
		rights := unix.UnixRights(int(s.store.data.Fd()))
		_, _, err = c.WriteMsgUnix([]byte(s.store.Config.Identity), rights, nil)
		c.Close()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Warn("local reader handshake failed", "err", err)
		}
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
