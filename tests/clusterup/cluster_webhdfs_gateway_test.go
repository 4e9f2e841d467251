package clusterup

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClusterUpWebHDFSGateway (issue 26): 'cluster up -webhdfs
// 127.0.0.1:0' starts a WebHDFS gateway as a member of the cluster on a
// free port, records the port in settings.json and prints its URL; the
// gateway serves a file put with the CLI; after 'cluster down' a plain
// 'cluster up' brings it back at the same address; killed, it is
// restarted there; a bad -webhdfs value is a usage error, and the
// recorded address taken by another program stops 'cluster up' with a
// message saying so.
func TestClusterUpWebHDFSGateway(t *testing.T) {
	lc := newLocalCluster(t)
	t.Cleanup(func() { // the gateway too, whatever happens
		if pid := lc.pidsFile()["webhdfs"]; pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if out, code := lc.run(lc.upArgs("-webhdfs", "9870")...); code != 2 || !strings.Contains(out, "-webhdfs 9870") {
		t.Errorf("cluster up -webhdfs 9870: exit %d, want 2 and a message naming the flag:\n%s", code, out)
	}
	out := lc.mustRun(lc.upArgs("-taskserver-slots", "0", "-webhdfs", "127.0.0.1:0", "-detach")...)
	addr := recordedWebHDFSAddr(t, lc)
	if want := "http://" + addr + "/webhdfs/v1/"; !strings.Contains(out, want) {
		t.Errorf("cluster up does not print the gateway's URL %s:\n%s", want, out)
	}
	lc.putLocal("/d", map[string][]byte{"f": []byte("hello, webhdfs\n")})
	checkGatewayFileLength(t, addr, "/d/f", 15)

	lc.mustRun("cluster", "down", "-dir", lc.dir)
	out = lc.mustRun(lc.upArgs("-detach")...)
	if again := recordedWebHDFSAddr(t, lc); again != addr {
		t.Fatalf("the gateway moved from %s to %s across cluster down/up", addr, again)
	}
	if !strings.Contains(out, "http://"+addr+"/webhdfs/v1/") {
		t.Errorf("the second cluster up does not print the gateway's URL:\n%s", out)
	}
	checkGatewayFileLength(t, addr, "/d/f", 15)

	// A member like the others: killed, it is restarted at its address.
	pid := lc.pidsFile()["webhdfs"]
	if pid <= 0 {
		t.Fatalf("no webhdfs member in the pids file: %v", lc.pidsFile())
	}
	syscall.Kill(pid, syscall.SIGKILL)
	deadline := time.Now().Add(2 * time.Minute)
	for p := lc.pidsFile()["webhdfs"]; p == pid || p <= 0 || !gatewayAnswers(addr); p = lc.pidsFile()["webhdfs"] {
		if time.Now().After(deadline) {
			t.Fatalf("the killed gateway (pid %d) was not restarted at %s", pid, addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	checkGatewayFileLength(t, addr, "/d/f", 15)

	// Its recorded address taken by another program: cluster up says so
	// rather than moving the gateway.
	lc.mustRun("cluster", "down", "-dir", lc.dir)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if out, code := lc.run(lc.upArgs("-detach")...); code == 0 || !strings.Contains(out, addr) || !strings.Contains(out, "settings.json") {
		t.Errorf("cluster up with the gateway's address taken: exit %d, want a failure naming %s and settings.json:\n%s", code, addr, out)
	}
}

// gatewayAnswers reports whether a WebHDFS gateway answers at addr.
func gatewayAnswers(addr string) bool {
	resp, err := http.Get("http://" + addr + "/webhdfs/v1/?op=GETHOMEDIRECTORY&user.name=nobody")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// recordedWebHDFSAddr returns the gateway address recorded in the
// cluster's settings.json, which must be a concrete loopback address.
func recordedWebHDFSAddr(t *testing.T, lc *localCluster) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(lc.dir, "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		WebHDFSAddr string `json:"webhdfs_addr"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.WebHDFSAddr, "127.0.0.1:") || strings.HasSuffix(s.WebHDFSAddr, ":0") {
		t.Fatalf("settings.json records webhdfs_addr %q, want the gateway's loopback address:\n%s", s.WebHDFSAddr, b)
	}
	return s.WebHDFSAddr
}

// checkGatewayFileLength asks the gateway at addr for GETFILESTATUS of
// path (as the current user, by pseudo authentication from loopback) and
// checks that it is a file of length bytes.
func checkGatewayFileLength(t *testing.T, addr, path string, length int64) {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/webhdfs/v1%s?op=GETFILESTATUS&user.name=%s", addr, path, u.Username))
	if err != nil {
		t.Fatalf("GETFILESTATUS %s at the cluster's gateway: %v", path, err)
	}
	defer resp.Body.Close()
	var st struct {
		FileStatus struct {
			Type   string `json:"type"`
			Length int64  `json:"length"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GETFILESTATUS %s: status %d, %v", path, resp.StatusCode, err)
	}
	if st.FileStatus.Type != "FILE" || st.FileStatus.Length != length {
		t.Fatalf("GETFILESTATUS %s = %+v, want a FILE of %d bytes", path, st.FileStatus, length)
	}
}
