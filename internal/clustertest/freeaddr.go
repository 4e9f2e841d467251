package clustertest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lowestPort is the bottom of the range FreeAddr picks ports from.
const lowestPort = 10000

// FreeAddr returns a loopback address, for a process to listen on, whose
// port is free at the moment. The port is below the kernel's ephemeral
// range (ip_local_port_range): the outgoing connections of the tests
// running in parallel (one process per test package) take their ports
// from that range, and one of them could take a port picked there before
// the process binds it ("address already in use").
func FreeAddr(t testing.TB) string {
	t.Helper()
	top := ephemeralStart()
	for try := 0; try < 100 && top > lowestPort; try++ {
		port := lowestPort + rand.IntN(top-lowestPort)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			ln.Close()
			return ln.Addr().String()
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// ephemeralStart is the first port of the kernel's ephemeral range.
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
