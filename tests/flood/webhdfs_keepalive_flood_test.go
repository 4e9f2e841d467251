package flood

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestWebHDFSOutlastsKeepAliveFlood: the WebHDFS gateway takes the accept
// path every other server takes (internal/connlimit): while more
// keep-alive connections than it has file descriptors sit idle after one
// request each (net/http alone keeps them for its two-minute idle
// timeout), a new client is still served.
func TestWebHDFSOutlastsKeepAliveFlood(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	s := startLimited(t, c, serverFDLimit, "plasma: serving WebHDFS on ", "webhdfs", "-listen", "127.0.0.1:0")
	base := strings.TrimSuffix(strings.TrimPrefix(s.line, "plasma: serving WebHDFS on "), "/")
	addr := strings.TrimPrefix(strings.TrimSuffix(base, "/webhdfs/v1"), "http://")
	flood := floodKeepAlive(t, addr)
	s.mustRun(t, "under the flood")
	code, b, err := httpGet(base+"/?op=GETFILESTATUS&user.name=alice", 30*time.Second)
	if err != nil || code != http.StatusOK || !strings.Contains(string(b), `"type":"DIRECTORY"`) {
		s.mustRun(t, "under the flood")
		t.Fatalf("GETFILESTATUS / while %d keep-alive connections are idle: %d %q %v", len(flood), code, b, err)
	}
}
