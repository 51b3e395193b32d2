package sip

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// capListener caps the TCP connections the SIP server accepts, in total
// and per source IP, and closes those that stay silent (issue 11 item 5).
// A connection over a cap is closed as soon as it is accepted, before
// sipgo starts a reader for it; an accepted one is closed when a read has
// waited idle (keep-alive CRLFs and every byte of a message reset it).
type capListener struct {
	net.Listener
	idle          time.Duration
	total, perIP  int
	refused, shut func()

	mu   sync.Mutex
	open int
	byIP map[netip.Addr]int
}

func newCapListener(l net.Listener, idle time.Duration, total, perIP int, refused, idleClosed func()) *capListener {
	return &capListener{Listener: l, idle: idle, total: total, perIP: perIP, refused: refused, shut: idleClosed,
		byIP: map[netip.Addr]int{}}
}

// Accept returns the next connection within the caps.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := netip.Addr{}
		if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			ip = ap.Addr().Unmap()
		}
		l.mu.Lock()
		ok := l.open < l.total && l.byIP[ip] < l.perIP
		if ok {
			l.open++
			l.byIP[ip]++
		}
		l.mu.Unlock()
		if !ok {
			l.refused()
			c.Close()
			continue
		}
		return &idleConn{Conn: c, l: l, ip: ip}, nil
	}
}

func (l *capListener) release(ip netip.Addr) {
	l.mu.Lock()
	l.open--
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
	l.mu.Unlock()
}

// count is the number of connections held.
func (l *capListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// idleConn is an accepted connection whose every read has a deadline.
type idleConn struct {
	net.Conn
	l    *capListener
	ip   netip.Addr
	once sync.Once
}

func (c *idleConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.l.idle)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.l.shut()
		c.Close()
	}
	return n, err
}

func (c *idleConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}
