package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterUpWebHDFSGateway (issue 26): 'cluster up -webhdfs
// 127.0.0.1:0' starts a WebHDFS gateway as a member of the cluster on a
// free port, records the port in settings.json and prints its URL; the
// gateway serves a file put with the CLI; after 'cluster down' a plain
// 'cluster up' brings it back at the same address.
func TestClusterUpWebHDFSGateway(t *testing.T) {
	lc := newLocalCluster(t)
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
