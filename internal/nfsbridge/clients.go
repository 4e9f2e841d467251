package nfsbridge

import (
	"fmt"
	"log"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// ClientList is the set of client addresses the bridge serves (plasma nfs
// -clients). AUTH_UNIX lets every client that may connect claim any uid,
// so which machines may connect is the one boundary the bridge can draw.
type ClientList struct {
	prefixes []netip.Prefix
}

// LoopbackClients is the default list: this machine only.
func LoopbackClients() ClientList {
	return ClientList{prefixes: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("::1/128"),
	}}
}

// ParseClients reads a comma-separated list of addresses and CIDR
// networks (192.168.1.7, 10.0.0.0/8, fd00::/8).
func ParseClients(s string) (ClientList, error) {
	var l ClientList
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := parseClient(item)
		if err != nil {
			return ClientList{}, err
		}
		l.prefixes = append(l.prefixes, p)
	}
	if len(l.prefixes) == 0 {
		return ClientList{}, fmt.Errorf("no client address in %q (give addresses or networks, e.g. 192.168.1.0/24,10.0.0.7)", s)
	}
	return l, nil
}

func parseClient(item string) (netip.Prefix, error) {
	if strings.Contains(item, "/") {
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a network (e.g. 192.168.1.0/24)", item)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(item)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address (e.g. 192.168.1.7) or a network (e.g. 192.168.1.0/24)", item)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Allows reports whether a client at a may connect.
func (l ClientList) Allows(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range l.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (l ClientList) String() string {
	s := make([]string, len(l.prefixes))
	for i, p := range l.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Gate returns a listener that closes, as soon as they are accepted, the
// connections of clients not on the list and, with securePorts, those from
// a source port of 1024 or above (knfsd's "secure": on most systems only
// root binds below 1024, so a user of a client machine cannot talk to the
// bridge directly). Refusals are logged, at most one line a second.
func Gate(l net.Listener, clients ClientList, securePorts bool) net.Listener {
	return &gatedListener{Listener: l, clients: clients, secure: securePorts}
}

type gatedListener struct {
	net.Listener
	clients ClientList
	secure  bool

	mu         sync.Mutex
	lastLog    time.Time
	unreported int // refusals since the last line logged
}

func (g *gatedListener) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		why := g.refusal(c.RemoteAddr())
		if why == "" {
			return c, nil
		}
		c.Close()
		g.logRefusal(c.RemoteAddr(), why)
	}
}

// refusal says why a connection from addr is refused; "" if it is not.
func (g *gatedListener) refusal(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return "not a TCP/IP address"
	}
	ap := ta.AddrPort()
	if !g.clients.Allows(ap.Addr().WithZone("")) {
		return "not in -clients " + g.clients.String()
	}
	if g.secure && ap.Port() >= 1024 {
		return fmt.Sprintf("source port %d is not privileged (-secure)", ap.Port())
	}
	return ""
}

func (g *gatedListener) logRefusal(addr net.Addr, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if now.Sub(g.lastLog) < time.Second {
		g.unreported++
		return
	}
	more := ""
	if g.unreported > 0 {
		more = fmt.Sprintf(" (and %d more refused since the last report)", g.unreported)
	}
	log.Printf("plasma nfs: refused a connection from %s: %s%s", addr, why, more)
	g.lastLog, g.unreported = now, 0
}
