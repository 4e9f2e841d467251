package namenode

import (
	"fmt"
	"net"
	"strings"
)

// ParseRaftDial parses "id=host:port,...": where this member reaches the
// Raft port of each listed peer when not at the port after the peer's
// client address (through a proxy, a tunnel or an address translation).
// The group's identity does not depend on it: each member may reach the
// others its own way.
func ParseRaftDial(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		id, addr, ok := strings.Cut(f, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("%q: want id=host:port", f)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %s: %w", id, err)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("peer id %s given twice", id)
		}
		out[id] = addr
	}
	return out, nil
}

// raftVia maps the Raft addresses of the peers in cfg.RaftDial to the
// addresses this member dials instead.
func (g *Group) raftVia() (map[string]string, error) {
	via := map[string]string{}
	for id, addr := range g.cfg.RaftDial {
		p, ok := g.peer(id)
		if !ok {
			return nil, fmt.Errorf("namenode group: -raft-dial names %s, which is not among the peers (%s)", id, formatPeers(g.cfg.Peers))
		}
		if id == g.cfg.Self {
			return nil, fmt.Errorf("namenode group: -raft-dial names this member (%s); it lists how to reach the others", id)
		}
		ra, _ := RaftAddr(p.Addr)
		via[ra] = addr
	}
	return via, nil
}

// dialAddr is the address dialed to reach the Raft address addr.
func (s *groupStream) dialAddr(addr string) string {
	if a, ok := s.via[addr]; ok {
		return a
	}
	return addr
}
