package connlimit

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// failingListener fails its first n Accepts as a process out of file
// descriptors does.
type failingListener struct {
	net.Listener
	n int
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.n > 0 {
		l.n--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether the server closed c (a read ends with
// EOF or a reset rather than timing out). It waits long for a close
// expected (want), briefly for one not.
func closedByServer(c net.Conn, want bool) bool {
	wait := 100 * time.Millisecond
	if want {
		wait = 10 * time.Second
	}
	c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func TestAcceptOutlastsDescriptorErrors(t *testing.T) {
	ln := listen(t)
	l := Listen(&failingListener{Listener: ln, n: 3}, Options{Log: quiet})
	dial(t, ln.Addr().String())
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("Accept after out-of-descriptor errors: %v", err)
	}
	c.Close()
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener: %v, want net.ErrClosed", err)
	}
}

func TestOldestPendingMakesRoom(t *testing.T) {
	ln := listen(t)
	l := Listen(ln, Options{MaxPending: 2, MaxOpen: 100, Log: quiet})
	addr := ln.Addr().String()
	var clients, accepted []net.Conn
	for range 3 {
		clients = append(clients, dial(t, addr))
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		accepted = append(accepted, c)
		if len(accepted) == 2 {
			Admit(accepted[1]) // finished its handshake: never closed for room
		}
	}
	clients = append(clients, dial(t, addr))
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	// Pending were 1 and 3 when 4 came: 1, the oldest, made room.
	for i, want := range []bool{true, false, false, false} {
		if got := closedByServer(clients[i], want); got != want {
			t.Errorf("connection %d closed by the server: %v, want %v", i+1, got, want)
		}
	}
}

func TestFullListenerClosesLongestIdle(t *testing.T) {
	ln := listen(t)
	l := Listen(ln, Options{MaxPending: 1, MaxOpen: 2, Log: quiet})
	addr := ln.Addr().String()
	var clients []net.Conn
	for i := range 2 {
		clients = append(clients, dial(t, addr))
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		Admit(c)
		SetIdle(c, i == 0)
	}
	clients = append(clients, dial(t, addr))
	if _, err := l.Accept(); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, false} {
		if got := closedByServer(clients[i], want); got != want {
			t.Errorf("connection %d closed by the server: %v, want %v", i+1, got, want)
		}
	}
}

func TestPendingPerSource(t *testing.T) {
	ln := listen(t)
	l := Listen(ln, Options{MaxPending: 10, PendingPerSource: 1, MaxOpen: 100, Log: quiet})
	addr := ln.Addr().String()
	from := func(ip net.IP) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := l.Accept(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	a1 := from(net.IPv4(127, 0, 0, 1))
	b := from(net.IPv4(127, 0, 0, 2))
	a2 := from(net.IPv4(127, 0, 0, 1))
	for name, c := range map[string]net.Conn{"first from 127.0.0.1": a1, "from 127.0.0.2": b, "second from 127.0.0.1": a2} {
		want := name == "first from 127.0.0.1"
		if got := closedByServer(c, want); got != want {
			t.Errorf("%s closed by the server: %v, want %v", name, got, want)
		}
	}
}

func TestBudget(t *testing.T) {
	b := NewBudget(100, 50*time.Millisecond)
	if err := b.Acquire(80); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(30); err == nil {
		t.Fatal("acquired past the budget")
	}
	b.Release(80)
	if err := b.Acquire(100); err != nil {
		t.Fatal(err)
	}
	b.Release(100)
	if err := b.Acquire(101); err == nil {
		t.Fatal("acquired more than the whole budget")
	}
}

func TestBudgetWaitsForRelease(t *testing.T) {
	b := NewBudget(100, time.Minute)
	if err := b.Acquire(80); err != nil {
		t.Fatal(err)
	}
	got := make(chan error)
	go func() { got <- b.Acquire(50) }()
	b.Release(80)
	if err := <-got; err != nil {
		t.Fatalf("Acquire after a release: %v", err)
	}
}
