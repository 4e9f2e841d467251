package testkit

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// BlockCRC is the checksum of a block of bs bytes that starts with data
// and is zero after it.
func BlockCRC(data []byte, bs int) uint32 {
	b := make([]byte, bs)
	copy(b, data)
	return CRC32C(b)
}

// RawAs opens a raw namenode connection with a credential file.
func RawAs(t *testing.T, c *clustertest.Procs, credFile string) *rpc.Conn {
	t.Helper()
	cred, err := auth.LoadCredential(credFile)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := rpc.Dial(context.Background(), c.NN.Addr, auth.Privacy, cred)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// MustCall sends q on conn and fails the test unless the answer is OK.
func MustCall(t *testing.T, conn *rpc.Conn, q *wire.Request) *wire.Response {
	t.Helper()
	r, err := conn.Call(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if r.Code != wire.OK {
		t.Fatalf("%s: %s", q.Op, r.Msg)
	}
	return r
}

// ProcWriteChars reports how many bytes a process has passed to write calls.
func ProcWriteChars(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("no wchar in /proc/pid/io")
	return 0
}

// DataCall sends one data protocol request (with data for writes) on a
// new authenticated connection and returns the response.
func DataCall(t *testing.T, addr string, cred *auth.Credential, q *wire.DataReq, data []byte) *wire.DataResp {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	nc, err := auth.Client(raw, auth.Auth, cred)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write(append(wire.FrameDataHeader(q), data...)); err != nil {
		t.Fatal(err)
	}
	resp, err := wire.ReadDataResp(bufio.NewReader(nc))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
