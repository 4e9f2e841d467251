package vfs

import (
	"os/user"
	"strconv"
	"sync"
)

// Owners are names in PlasmaFS and numbers in the kernel and in NFS. The
// mapping uses the local user and group database: a name maps to its id;
// a name made of digits is that number (so an id without a local name
// survives a round trip); anything else is Nobody. An id maps back to its
// local name, or to its digits.

// Nobody is the id of owners without a local id.
const Nobody = 65534

type idMap struct {
	self *Owner // the mount's own user and group, shown as local ids

	mu     sync.Mutex
	uids   map[string]uint32
	gids   map[string]uint32
	users  map[uint32]string
	groups map[uint32]string
}

// Owner maps the mount's PlasmaFS user and group (its credential's) to
// local ids, whatever the local user database says: files the mount
// creates then belong to the local user running it, as on a local
// filesystem (and NFS clients that check access themselves let it in).
type Owner struct {
	User, Group string
	UID, GID    uint32
}

func newIDMap(self *Owner) *idMap {
	return &idMap{self: self, uids: map[string]uint32{}, gids: map[string]uint32{}, users: map[uint32]string{}, groups: map[uint32]string{}}
}

func numeric(s string) (uint32, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

// UID returns the local user id of the PlasmaFS user name.
func (m *idMap) UID(name string) uint32 {
	if m.self != nil && name == m.self.User {
		return m.self.UID
	}
	if n, ok := numeric(name); ok {
		return n
	}
	m.mu.Lock()
	id, ok := m.uids[name]
	m.mu.Unlock()
	if ok {
		return id
	}
	id = Nobody
	if u, err := user.Lookup(name); err == nil {
		if n, ok := numeric(u.Uid); ok {
			id = n
		}
	}
	m.mu.Lock()
	m.uids[name] = id
	m.mu.Unlock()
	return id
}

// GID returns the local group id of the PlasmaFS group name.
func (m *idMap) GID(name string) uint32 {
	if m.self != nil && name == m.self.Group {
		return m.self.GID
	}
	if n, ok := numeric(name); ok {
		return n
	}
	m.mu.Lock()
	id, ok := m.gids[name]
	m.mu.Unlock()
	if ok {
		return id
	}
	id = Nobody
	if g, err := user.LookupGroup(name); err == nil {
		if n, ok := numeric(g.Gid); ok {
			id = n
		}
	}
	m.mu.Lock()
	m.gids[name] = id
	m.mu.Unlock()
	return id
}

// UserName returns the PlasmaFS user name for a local user id.
func (m *idMap) UserName(uid uint32) string {
	if m.self != nil && uid == m.self.UID {
		return m.self.User
	}
	m.mu.Lock()
	name, ok := m.users[uid]
	m.mu.Unlock()
	if ok {
		return name
	}
	name = strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	m.mu.Lock()
	m.users[uid] = name
	m.mu.Unlock()
	return name
}

// GroupName returns the PlasmaFS group name for a local group id.
func (m *idMap) GroupName(gid uint32) string {
	if m.self != nil && gid == m.self.GID {
		return m.self.Group
	}
	m.mu.Lock()
	name, ok := m.groups[gid]
	m.mu.Unlock()
	if ok {
		return name
	}
	name = strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(name); err == nil {
		name = g.Name
	}
	m.mu.Lock()
	m.groups[gid] = name
	m.mu.Unlock()
	return name
}
