// Package loopback picks addresses on 127.0.0.1 for processes that are
// started later to listen on: the members 'plasma cluster up' starts and
// the processes of the integration tests.
package loopback

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowestPort is the bottom of the range FreeAddr picks ports from.
const lowestPort = 10000

// FreeAddr returns a loopback address whose port is free at the moment.
// The port is chosen below the kernel's ephemeral range
// (ip_local_port_range) when it can be: bind(:0) hands out ports from that
// range, where any outgoing connection on the machine may take one before
// the process that is to listen there has started ("address already in
// use"). A port is never handed out twice by one process: the addresses
// a caller asks for before starting anything are all free at once, so a
// random pick could otherwise repeat one ('cluster up' gave a task server
// the namenode's admin port).
func FreeAddr() (string, error) {
	top := ephemeralStart()
	for try := 0; try < 100 && top > lowestPort; try++ {
		port := lowestPort + rand.IntN(top-lowestPort)
		if !handOut(port) {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			ln.Close()
			return ln.Addr().String(), nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// handedOut holds the ports FreeAddr returned (or tried) in this process.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// handOut records port as handed out; false if it already was.
func handOut(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[port] {
		return false
	}
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	handedOut.ports[port] = true
	return true
}

// ephemeralStart is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

// Claim reports whether addr, an address recorded earlier, can be
// listened on now and has not been handed out in this process, and
// records it as handed out, so that FreeAddr never returns it too.
func Claim(addr string) bool {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(p)
	if err != nil || !handOut(port) {
		return false
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
