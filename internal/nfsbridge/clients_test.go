package nfsbridge

import (
	"net/netip"
	"testing"
)

func TestClientList(t *testing.T) {
	l, err := ParseClients("192.168.1.0/24, 10.0.0.7,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"192.168.1.200":        true,
		"::ffff:192.168.1.200": true, // an IPv4 client of a dual-stack listener
		"192.168.2.1":          false,
		"10.0.0.7":             true,
		"10.0.0.8":             false,
		"fd12::1":              true,
		"127.0.0.1":            false,
	} {
		if got := l.Allows(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s allowed: %v, want %v", addr, got, want)
		}
	}
	if !LoopbackClients().Allows(netip.MustParseAddr("127.0.1.7")) || LoopbackClients().Allows(netip.MustParseAddr("192.168.1.1")) {
		t.Error("the default list is not loopback only")
	}
	for _, bad := range []string{"", ",", "host.example", "10.0.0.0/33", "10.0.0.1-10.0.0.9"} {
		if _, err := ParseClients(bad); err == nil {
			t.Errorf("ParseClients(%q) accepted", bad)
		}
	}
}
