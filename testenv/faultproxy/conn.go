package main

import (
	"errors"
	"log"
	"net"
	"sync"
	"time"
)

// The proxy is its own net.Listener: a goroutine accepts raw TCP connections
// from the real listening socket (which refuse() closes and reopens) and
// hands them, wrapped in faultConn, to the HTTPS server through a channel.

func (p *proxy) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	p.addr = ln.Addr().String() // the same port is reused after refuse()
	p.ln = ln
	go p.acceptLoop()
	return nil
}

func (p *proxy) acceptLoop() {
	for {
		p.mu.Lock()
		for p.ln == nil { // refusing: wait for relisten()
			p.lnReady.Wait()
		}
		ln := p.ln
		p.mu.Unlock()

		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				log.Printf("faultproxy: accept: %v", err)
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		fc := &faultConn{Conn: c, p: p, closed: make(chan struct{})}
		p.mu.Lock()
		p.conns[fc] = struct{}{}
		p.stats.Connections++
		p.mu.Unlock()
		p.incoming <- fc
	}
}

// Accept, Close and Addr make the proxy the HTTPS server's listener.
func (p *proxy) Accept() (net.Conn, error) { return <-p.incoming, nil }
func (p *proxy) Close() error              { return nil }
func (p *proxy) Addr() net.Addr            { a, _ := net.ResolveTCPAddr("tcp", p.addr); return a }

// refuse closes the listening socket for d, so new connections are refused
// by the kernel; open connections are untouched.
func (p *proxy) refuse(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	if p.refuseTimer != nil {
		p.refuseTimer.Stop()
	}
	p.refuseTimer = time.AfterFunc(d, p.relisten)
}

// relisten opens the listening socket again on the same address.
func (p *proxy) relisten() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refuseTimer != nil {
		p.refuseTimer.Stop()
		p.refuseTimer = nil
	}
	for p.ln == nil {
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			log.Printf("faultproxy: listen again on %s: %v (retrying)", p.addr, err)
			p.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			p.mu.Lock()
			continue
		}
		p.ln = ln
	}
	p.lnReady.Broadcast()
}

// cut closes every open client connection; with reset, the peer gets a TCP
// RST instead of an orderly FIN.
func (p *proxy) cut(reset bool) int {
	p.mu.Lock()
	conns := make([]*faultConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		if tc, ok := c.Conn.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
	return len(conns)
}

// stall stops all traffic on client connections (open and new) for d, or
// until unstall when d is 0.
func (p *proxy) stall(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stallCh == nil {
		p.stallCh = make(chan struct{})
	}
	if p.stallTimer != nil {
		p.stallTimer.Stop()
		p.stallTimer = nil
	}
	if d > 0 {
		p.stallTimer = time.AfterFunc(d, p.unstall)
	}
}

func (p *proxy) unstall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stallTimer != nil {
		p.stallTimer.Stop()
		p.stallTimer = nil
	}
	if p.stallCh != nil {
		close(p.stallCh)
		p.stallCh = nil
	}
}

// faultConn is a client-facing TCP connection that obeys stall and delay.
type faultConn struct {
	net.Conn
	p         *proxy
	closed    chan struct{}
	closeOnce sync.Once
}

// hold blocks while the proxy is stalled, then (if withDelay) sleeps the
// configured delay. It returns an error if the connection is closed meanwhile.
func (c *faultConn) hold(withDelay bool) error {
	for {
		c.p.mu.Lock()
		stalled, delay := c.p.stallCh, c.p.delay
		c.p.mu.Unlock()
		if stalled == nil {
			if withDelay && delay > 0 {
				select {
				case <-time.After(delay):
				case <-c.closed:
					return net.ErrClosed
				}
			}
			return nil
		}
		select {
		case <-stalled:
		case <-c.closed:
			return net.ErrClosed
		}
	}
}

// Read holds received bytes back while stalled (a Read already blocked in
// the kernel when the stall begins returns its bytes only after it ends).
func (c *faultConn) Read(b []byte) (int, error) {
	if err := c.hold(false); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		if herr := c.hold(true); herr != nil {
			return 0, herr
		}
	}
	return n, err
}

func (c *faultConn) Write(b []byte) (int, error) {
	if err := c.hold(true); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

func (c *faultConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.Conn.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
	return err
}
