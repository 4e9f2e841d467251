package flood

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// serverFDLimit is the descriptor limit the flooded servers run under, so
// that running out of descriptors is cheap; floodConns is more than that.
const (
	serverFDLimit = 256
	floodConns    = 600
)

// limitedServer is a server process (kv serve, nfs, mr web) started under
// a low file descriptor limit.
type limitedServer struct {
	name   string // its subcommand
	cmd    *exec.Cmd
	done   chan struct{}
	line   string      // the first line it printed that starts with the prefix asked for
	stderr *syncBuffer // what it wrote on stderr
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLimited starts 'plasma args...' limited to nofile open files and
// returns once it has printed a line starting with prefix.
func startLimited(t *testing.T, c *clustertest.Procs, nofile int, prefix string, args ...string) *limitedServer {
	t.Helper()
	s := &limitedServer{name: args[0], cmd: clustertest.LimitFiles(nofile, c.Bin, args...), done: make(chan struct{}), stderr: &syncBuffer{}}
	s.cmd.Env = c.Env()
	s.cmd.Stderr = s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		<-s.done
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			s.line = l
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
		s.cmd.Wait()
		close(s.done)
	}()
	if s.line == "" {
		<-s.done
		t.Fatalf("plasma %s did not start (exit %d): %s", s.name, s.cmd.ProcessState.ExitCode(), s.stderr)
	}
	return s
}

// mustRun fails the test if the server has exited.
func (s *limitedServer) mustRun(t *testing.T, when string) {
	t.Helper()
	select {
	case <-s.done:
		t.Fatalf("plasma %s exited %s (exit %d); its stderr:\n%s", s.name, when, s.cmd.ProcessState.ExitCode(), tail(s.stderr.String(), 2000))
	default:
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// loopbackSources returns n source addresses for floods: 127.0.1.1 and
// on (loopback answers the whole of 127/8), as if from n machines.
func loopbackSources(n int) []net.IP {
	ips := make([]net.IP, n)
	for i := range ips {
		ips[i] = net.IPv4(127, 0, 1+byte(i/250), 1+byte(i%250))
	}
	return ips
}

// floodIdle opens n connections to addr that send nothing, from the
// source addresses srcs in turn, and returns those that connected (the
// test closes them; a server that exits under the flood refuses the
// rest). Each dial is bounded in time.
func floodIdle(t *testing.T, addr string, n int, srcs []net.IP) []net.Conn {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() { closeConns(conns) })
	for i := 0; i < n; i++ {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: srcs[i%len(srcs)]}, Timeout: 5 * time.Second}
		nc, err := d.Dial("tcp", addr)
		if err != nil {
			continue // refused or the backlog is full: the server defends itself
		}
		conns = append(conns, nc)
	}
	return conns
}

func closeConns(conns []net.Conn) {
	for _, nc := range conns {
		nc.Close()
	}
}

// httpGet fetches url on a fresh connection from 127.0.0.1, giving up
// after timeout (generous: a server that serves answers at once).
func httpGet(url string, timeout time.Duration) (int, []byte, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: timeout}).Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestKVServeOutlastsDescriptorExhaustion: more idle connections than
// 'plasma kv serve' has file descriptors neither end it nor keep a
// client out, during the flood or after.
func TestKVServeOutlastsDescriptorExhaustion(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	c.MustRun("kv", "create", "-db", "/fd")
	if out, code := c.Run([]byte("value"), "kv", "insert", "-db", "/fd", "key"); code != 0 {
		t.Fatal(out)
	}
	s := startLimited(t, c, serverFDLimit, "listening on ", "kv", "serve", "-db", "/fd", "-listen", "127.0.0.1:0", "-refresh", "0")
	base, _, _ := strings.Cut(strings.TrimPrefix(s.line, "listening on "), " ")
	flood := floodIdle(t, strings.TrimPrefix(base, "http://"), floodConns, []net.IP{net.IPv4(127, 0, 0, 1)})
	check := func(when string) {
		t.Helper()
		s.mustRun(t, when)
		code, b, err := httpGet(base+"/key", 2*time.Minute)
		if err != nil || code != 200 || string(b) != "value" {
			s.mustRun(t, when)
			t.Fatalf("GET /key %s: %d %q %v", when, code, b, err)
		}
	}
	check(fmt.Sprintf("during a flood of %d idle connections", len(flood)))
	closeConns(flood)
	check("after the flood")
}

// TestNFSBridgeOutlastsDescriptorExhaustion: more idle connections than
// 'plasma nfs' has file descriptors neither end it nor keep a client out.
func TestNFSBridgeOutlastsDescriptorExhaustion(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	cl := c.Client(client.Config{})
	defer cl.Close()
	testkit.WriteFile(t, cl, "/f", []byte("through nfs"), 1)
	s := startLimited(t, c, serverFDLimit, "plasma: serving NFSv3", "nfs", "-listen", "127.0.0.1:0")
	addr := s.line[strings.LastIndex(s.line, " ")+1:]
	flood := floodIdle(t, addr, floodConns, []net.IP{net.IPv4(127, 0, 0, 1)})
	check := func(when string) {
		t.Helper()
		s.mustRun(t, when)
		b, err := testkit.NFSReadFile(testkit.DialNFS(t, addr), "f")
		if err != nil || string(b) != "through nfs" {
			s.mustRun(t, when)
			t.Fatalf("read through NFS %s: %q %v", when, b, err)
		}
	}
	check(fmt.Sprintf("during a flood of %d idle connections", len(flood)))
	closeConns(flood)
	check("after the flood")
}

// TestHTTPEndpointOutlastsKeepAliveFlood: the MapReduce web view (every
// HTTP endpoint takes the same accept path) serves a new client while
// more keep-alive connections than it has descriptors sit idle after a
// request each, which net/http alone keeps open for ever.
func TestHTTPEndpointOutlastsKeepAliveFlood(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	s := startLimited(t, c, serverFDLimit, "http://", "mr", "web", "-listen", "127.0.0.1:0")
	base := strings.TrimSuffix(s.line, "/")
	addr := strings.TrimPrefix(base, "http://")
	flood := floodKeepAlive(t, addr)
	s.mustRun(t, "under the flood")
	if code, _, err := httpGet(base+"/jobs.json", 30*time.Second); err != nil || code == 0 {
		s.mustRun(t, "under the flood")
		t.Fatalf("GET /jobs.json while %d keep-alive connections are idle: %d %v", len(flood), code, err)
	}
}

// floodKeepAlive opens up to floodConns connections to the HTTP server at
// addr (the test closes them), each asking one request net/http answers
// itself and leaving the connection open and idle. It stops at the first
// left unanswered: the server has no descriptor left, and the flood has
// done its worst.
func floodKeepAlive(t *testing.T, addr string) []net.Conn {
	t.Helper()
	var flood []net.Conn
	t.Cleanup(func() { closeConns(flood) })
	for i := 0; i < floodConns; i++ {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			break
		}
		flood = append(flood, nc)
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(nc, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			break
		}
		resp.Body.Close()
	}
	return flood
}

// TestDatanodeOutlastsDescriptorExhaustion: more idle connections than a
// datanode has file descriptors, from many addresses, neither end it
// (its local socket's accept used to return on EMFILE) nor keep readers
// out, over TCP or the local socket, during the flood or after.
func TestDatanodeOutlastsDescriptorExhaustion(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, DatanodeFDLimit: serverFDLimit})
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	data := testkit.RandomBytes(t, 3*int(c.Opts.Blocksize))
	testkit.WriteFile(t, cl, "/f", data, 1)
	dn := c.DNs[0]
	flood := floodIdle(t, dn.Addr, floodConns, loopbackSources(100))
	check := func(when string) {
		t.Helper()
		for _, short := range []bool{true, false} {
			if !dn.Running() {
				t.Fatalf("datanode exited %s:\n%s", when, c.ReadLog(dn))
			}
			r := c.Client(client.Config{NoShortCircuit: !short})
			got := testkit.ReadFile(t, r, "/f")
			r.Close()
			if !bytes.Equal(got, data) {
				t.Fatalf("read %s (short-circuit %v) returned wrong data", when, short)
			}
		}
	}
	check(fmt.Sprintf("during a flood of %d idle connections", len(flood)))
	closeConns(flood)
	check("after the flood")
}

// TestTaskServerOutlastsHandshakeFlood: a MapReduce task server under a
// low descriptor limit, flooded by more idle connections than it has
// descriptors from many addresses (none finishing the cluster handshake),
// keeps running and runs a job submitted while the flood is held open.
func TestTaskServerOutlastsHandshakeFlood(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	s := startLimited(t, c, serverFDLimit, "127.0.0.1:", "mr", "taskserver", "-listen", "127.0.0.1:0",
		"-datanode", c.DNs[0].Addr, "-slots", "2", "-credential", c.IssueCredential("taskserver", auth.RoleTaskServer))
	addr := s.line
	testkit.MRPut(t, c, "/in", map[string][]byte{"a": testkit.MRText(3, 2000)})
	flood := floodIdle(t, addr, floodConns, loopbackSources(100))
	s.mustRun(t, fmt.Sprintf("under a flood of %d idle connections", len(flood)))
	out, code := c.Run(nil, "mr", "run", "-input", "/in", "-output", "/out", "-work", "/work",
		"-partitions", "1", "-max-attempts", "1", "-taskserver", addr, "-map", "cat")
	s.mustRun(t, "after the job")
	if code != 0 {
		t.Fatalf("job on the flooded task server: exit %d:\n%s\ntask server:\n%s", code, out, s.stderr)
	}
}
