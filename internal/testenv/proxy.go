package testenv

import (
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// Proxy forwards TCP connections from a listener on 127.0.0.1 to an
// upstream address and counts the bytes it forwards each way. Blackhole
// makes every connection open at that moment silently drop what it receives
// in both directions (a peer gone behind a NAT or a load balancer: no reset,
// no answer), while connections made later work. Close stops it.
type Proxy struct {
	ln       net.Listener
	mu       sync.Mutex
	conns    []*proxied
	accepted atomic.Int32
	sent     atomic.Int64 // client to upstream
	received atomic.Int64 // upstream to client
	wg       sync.WaitGroup
}

type proxied struct {
	holed atomic.Bool
	a, b  net.Conn
}

// NewProxy listens on 127.0.0.1 and forwards to upstream (host:port).
func NewProxy(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = a.Close()
				continue
			}
			c := &proxied{a: a, b: b}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			p.accepted.Add(1)
			p.wg.Add(2)
			go func() { defer p.wg.Done(); c.pipe(b, a, &p.sent) }()
			go func() { defer p.wg.Done(); c.pipe(a, b, &p.received) }()
		}
	}()
	return p, nil
}

// Addr is the address to dial instead of upstream.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted is the number of connections accepted so far.
func (p *Proxy) Accepted() int { return int(p.accepted.Load()) }

// BytesSent is the number of bytes forwarded so far from clients to the
// upstream: on a TLS connection, requests with their TLS framing and
// handshakes.
func (p *Proxy) BytesSent() int64 { return p.sent.Load() }

// BytesReceived is the number of bytes forwarded so far from the upstream
// to clients.
func (p *Proxy) BytesReceived() int64 { return p.received.Load() }

// Blackhole makes the connections open now drop everything.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.holed.Store(true)
	}
}

// Close closes the listener and every connection and waits for the
// forwarding goroutines.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.a.Close()
		_ = c.b.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (c *proxied) pipe(dst, src net.Conn, count *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !c.holed.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			count.Add(int64(n))
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// ProxyConfig starts a Proxy in front of cfg's API server and returns a copy
// of cfg that talks to it (the server's certificate still matches: the proxy
// listens on 127.0.0.1 too).
func ProxyConfig(cfg *rest.Config) (*rest.Config, *Proxy, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("testenv: API server URL %q: %w", cfg.Host, err)
	}
	p, err := NewProxy(u.Host)
	if err != nil {
		return nil, nil, err
	}
	out := rest.CopyConfig(cfg)
	out.Host = "https://" + p.Addr()
	return out, p, nil
}
