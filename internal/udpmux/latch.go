package udpmux

import (
	"net/netip"
	"time"
)

// Latching: an endpoint behind NAT says in its SDP where it listens (a
// private address), but its datagrams arrive from the NAT's address and a
// port the NAT chose. A latch lets such an endpoint's handler take the
// first datagram from an address not registered yet, if its IP is one the
// endpoint may be at (the signalling source, the SDP's address), within a
// window; that source is then registered for the handler and the latch
// ends, so a source once learnt is never replaced. These are the relay's
// rules (package relay), for links on the shared socket.

// latch is one endpoint waiting to learn its source.
type latch struct {
	ips    []netip.Addr
	until  time.Time
	accept func(b []byte) bool // nil: any datagram
	h      Handler
	learnt func(from netip.AddrPort)
	done   bool // under Socket.mu
}

// Latch lets h take the first datagram from an unregistered source whose
// IP is one of ips, until the window ends: that source is registered for
// h, learnt is called with it (before h sees the datagram, outside the
// socket's lock), and the latch ends. It ends by itself after window;
// cancel ends it early (the endpoint was heard at its registered address,
// or it closed).
func (s *Socket) Latch(ips []netip.Addr, window time.Duration, h Handler, learnt func(from netip.AddrPort)) (cancel func()) {
	return s.LatchIf(ips, window, nil, h, learnt)
}

// LatchIf is Latch for the datagrams accept takes only (nil: any): two
// endpoints latching on one IP (a phone's audio and video streams, which
// its NAT maps to two ports) each learn their own source, told apart by
// what they send (their RTP payload types).
func (s *Socket) LatchIf(ips []netip.Addr, window time.Duration, accept func(b []byte) bool, h Handler, learnt func(from netip.AddrPort)) (cancel func()) {
	l := &latch{until: time.Now().Add(window), accept: accept, h: h, learnt: learnt}
	s.mu.Lock()
	for _, ip := range ips {
		ip = ip.Unmap()
		if !ip.IsValid() {
			continue
		}
		l.ips = append(l.ips, ip)
		s.latches[ip] = append(s.latches[ip], l)
	}
	s.mu.Unlock()
	cancel = func() {
		s.mu.Lock()
		s.endLatch(l)
		s.mu.Unlock()
	}
	time.AfterFunc(window, cancel) // an endpoint that never sends leaves nothing behind
	return cancel
}

// endLatch removes l from every IP it waits on (under s.mu).
func (s *Socket) endLatch(l *latch) {
	if l.done {
		return
	}
	l.done = true
	for _, ip := range l.ips {
		ls := s.latches[ip]
		for i, x := range ls {
			if x == l {
				ls = append(ls[:i:i], ls[i+1:]...)
				break
			}
		}
		if len(ls) == 0 {
			delete(s.latches, ip)
		} else {
			s.latches[ip] = ls
		}
	}
}

// latchFor finds the latch datagram b from an unregistered source ends
// (the first waiting for the source's IP that accepts b), registers the
// source for it and returns its handler; nil when none does. Expired
// latches met on the way end.
func (s *Socket) latchFor(from netip.AddrPort, b []byte) Handler {
	if from.Port() == 0 {
		return nil // nothing can be sent back to port 0
	}
	s.mu.RLock()
	waiting := len(s.latches[from.Addr()]) > 0
	s.mu.RUnlock()
	if !waiting {
		return nil
	}
	now := time.Now()
	var won *latch
	s.mu.Lock()
	for _, l := range append([]*latch(nil), s.latches[from.Addr()]...) {
		if now.After(l.until) {
			s.endLatch(l)
			continue
		}
		if _, taken := s.handlers[from]; !taken && won == nil && (l.accept == nil || l.accept(b)) {
			won = l
			s.endLatch(l)
			s.handlers[from] = l.h
		}
	}
	s.mu.Unlock()
	if won == nil {
		return nil
	}
	s.latched.Add(1)
	won.learnt(from)
	return won.h
}
