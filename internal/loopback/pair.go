package loopback

import (
	"fmt"
	"net"
	"strconv"
)

// FreePair returns a loopback address whose port and the next one are
// both free at the moment (a namenode group member serves clients on the
// first and its group's Raft traffic on the second).
func FreePair() (string, error) {
	for try := 0; try < 100; try++ {
		a, err := FreeAddr()
		if err != nil {
			return "", err
		}
		_, port, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(port)
		if p >= 65535 || !handOut(p+1) {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1)))
		if err == nil {
			ln.Close()
			return a, nil
		}
	}
	return "", fmt.Errorf("no two consecutive free ports on loopback")
}
