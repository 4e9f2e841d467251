package webhdfs

import (
	"net"
	"net/http"
	"net/netip"
	"os/user"
	"slices"
	"strings"
	"sync"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
)

// caller is who a request is served for.
type caller struct {
	user   string
	groups []string // the first is the group new files get
	super  bool     // a superuser credential: no permission checks
}

// Permission bits asked for (as the namenode's).
const (
	permRead   = 4
	permWrite  = 2
	permSearch = 1
)

// may reports whether c has the want bits on a, as the namenode decides
// for its own clients: the owner's bits for the owner, the group's for a
// member of the group, the others' otherwise.
func (c caller) may(a client.FileInfo, want uint32) bool {
	if c.super {
		return true
	}
	perm := client.UnixBits(a.Mode)
	var bits uint32
	switch {
	case a.User == c.user:
		bits = perm >> 6 & 7
	case slices.Contains(c.groups, a.Group):
		bits = perm >> 3 & 7
	default:
		bits = perm & 7
	}
	return bits&want == want
}

func (c caller) owns(a client.FileInfo) bool { return c.super || a.User == c.user }

func (c caller) group() string {
	if len(c.groups) == 0 {
		return c.user
	}
	return c.groups[0]
}

// identify returns the caller of r: the user of a verified client
// certificate, or the user.name of a request from a trusted address.
func (g *Gateway) identify(r *http.Request, q params) (caller, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		id := auth.IdentityOfCertificate(r.TLS.PeerCertificates[0])
		if g.opt.Cluster != "" && id.Cluster != g.opt.Cluster {
			return caller{}, excSecurity.errorf("the client certificate of %s is for cluster %q, not %q", id.User, id.Cluster, g.opt.Cluster)
		}
		if doas := q.get("doas"); doas != "" && doas != id.User {
			return caller{}, excAccess.errorf("user %s may not act as %s (doas): the gateway has no proxy users", id.User, doas)
		}
		return caller{user: id.User, groups: id.Groups, super: id.Super()}, nil
	}
	name := q.get("user.name")
	if !g.trusted(r.RemoteAddr) {
		return caller{}, excSecurity.errorf("pseudo authentication (user.name) is accepted only from this machine and the gateway's -trusted-proxies, not from %s; present a client certificate issued by the cluster CA over https", r.RemoteAddr)
	}
	if name == "" {
		return caller{}, excSecurity.errorf("no user: add user.name=NAME to the request (pseudo authentication)")
	}
	if len(name) > 255 || strings.ContainsAny(name, "/:\x00\n\r\t ") {
		return caller{}, excArgument.errorf("user.name %q is not a valid user name", name)
	}
	if doas := q.get("doas"); doas != "" && doas != name {
		return caller{}, excAccess.errorf("user %s may not act as %s (doas): the gateway has no proxy users", name, doas)
	}
	return caller{user: name, groups: g.groups.of(name)}, nil
}

// trusted reports whether pseudo authentication is accepted from addr.
func (g *Gateway) trusted(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	return a.IsLoopback() || g.opt.Trusted.Allows(a)
}

// groupCache maps user names to their groups in the local group database,
// as Hadoop's default (shell) group mapping does; a name without a local
// account is in the group of its own name only, as a credential issued
// without groups is.
type groupCache struct {
	mu sync.Mutex
	m  map[string][]string
}

func (gc *groupCache) of(name string) []string {
	gc.mu.Lock()
	gs, ok := gc.m[name]
	gc.mu.Unlock()
	if ok {
		return gs
	}
	gs = localGroups(name)
	gc.mu.Lock()
	if gc.m == nil || len(gc.m) > 4096 {
		gc.m = map[string][]string{}
	}
	gc.m[name] = gs
	gc.mu.Unlock()
	return gs
}

func localGroups(name string) []string {
	u, err := user.Lookup(name)
	if err != nil {
		return []string{name}
	}
	var out []string
	ids, _ := u.GroupIds()
	for _, id := range append([]string{u.Gid}, ids...) {
		gr, err := user.LookupGroupId(id)
		if err == nil && !slices.Contains(out, gr.Name) {
			out = append(out, gr.Name)
		}
	}
	if len(out) == 0 {
		out = []string{name}
	}
	return out
}
