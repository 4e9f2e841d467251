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
		rights := unix.UnixRights(int(s.store.data.Fd()))
		_, _, err = c.WriteMsgUnix([]byte(s.store.Config.Identity), rights, nil)
		c.Close()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Warn("local reader handshake failed", "err", err)
		}
	}
}
