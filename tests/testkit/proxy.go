package testkit

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to target, records the bytes and counts
// those sent upstream (client to target).
type Proxy struct {
	ln  net.Listener
	mu  sync.Mutex
	buf bytes.Buffer
	up  atomic.Int64
}

// NewProxy starts a TCP proxy on loopback to target that records what
// passes through it (Contains) and counts the bytes sent upstream.
func NewProxy(t *testing.T, target string) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				return
			}
			cp := func(dst, src net.Conn, w io.Writer) {
				io.Copy(w, src)
				dst.Close()
			}
			go cp(a, b, io.MultiWriter(a, p))
			go cp(b, a, io.MultiWriter(b, p, upCounter{&p.up}))
		}
	}()
	return p
}

func (p *Proxy) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Write(b)
}

// upCounter counts the bytes written through it.
type upCounter struct{ n *atomic.Int64 }

func (c upCounter) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return len(b), nil
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Upstream is the number of bytes the proxy has sent to the target.
func (p *Proxy) Upstream() int64 { return p.up.Load() }

// Contains reports whether s passed through the proxy.
func (p *Proxy) Contains(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Contains(p.buf.Bytes(), []byte(s))
}
