package rtplink

import (
	"net/netip"
	"sync/atomic"

	"github.com/convene/convene/internal/media"

	"github.com/convene/convene/internal/udpmux"
)

// latch starts the link's latches (Config.Latch): one on the RTP socket
// and, unless RTCP is muxed, one on the RTCP socket, each learning its own
// source (a NAT maps the two ports apart).
func (l *Link) latch() {
	if len(l.cfg.Latch) == 0 || l.cfg.LatchWindow <= 0 {
		return
	}
	var accept func(b []byte) bool
	if pt := l.cfg.LatchPT; pt != nil {
		accept = func(b []byte) bool {
			return media.Classify(b, false) == media.ClassRTP && pt(b[1]&0x7f)
		}
	}
	stop := l.socks.RTP.LatchIf(l.cfg.Latch, l.cfg.LatchWindow, accept, l, func(from netip.AddrPort) {
		l.move(&l.dest, l.socks.RTP, from)
	})
	l.unlatchRTP.Store(&stop)
	if !l.cfg.RTCPMux && l.cfg.LatchPT == nil {
		stop := l.socks.RTCP.Latch(l.cfg.Latch, l.cfg.LatchWindow, rtcpHandler{l}, func(from netip.AddrPort) {
			l.move(&l.rtcpDest, l.socks.RTCP, from)
		})
		l.unlatchRTCP.Store(&stop)
	}
}

// move makes from the endpoint's address for what d sends, in place of
// the one it had (which the socket forgets). Called by the socket once a
// latch learnt from, which the socket has registered for the link.
func (l *Link) move(d interface {
	Swap(*udpmux.Dest) *udpmux.Dest
}, sock *udpmux.Socket, from netip.AddrPort) {
	old := d.Swap(udpmux.NewDest(from, l.cfg.Queue))
	sock.Unregister(old.Addr())
	if !l.open.Load() {
		sock.Unregister(from) // closed meanwhile: Close forgot the old address
	}
}

// stopLatching ends a latch still waiting: the endpoint was heard on that
// socket (at its address or at a learnt one), or the link closed.
func stopLatching(p *atomic.Pointer[func()]) {
	if p.Load() == nil {
		return
	}
	if stop := p.Swap(nil); stop != nil {
		(*stop)()
	}
}
