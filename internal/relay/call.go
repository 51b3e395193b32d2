package relay

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convene/convene/internal/relay/kfwd"
)

// call is one SIP call's media: a stream per SDP m= line. Its fields are
// guarded by Relay.mu, except the packet count the workers add to.
type call struct {
	id      string
	tags    [2]string // side 0: the first offerer (from-tag), side 1: the answerer (to-tag)
	streams []*stream
	user    string     // charged for the streams ("" if none)
	source  netip.Addr // likewise (invalid if unknown)
	held    int        // streams charged

	packets  atomic.Uint64 // relayed so far, added per batch by the workers
	seen     uint64        // packets at the last sweep that saw it change
	lastMove time.Time     // when the sweeper last saw packets move (or creation)
}

// sideOf returns the side whose tag is tag, or -1.
func (c *call) sideOf(tag string) int {
	for i, t := range c.tags {
		if t != "" && t == tag {
			return i
		}
	}
	return -1
}

// stream is one m= line of a call: two sides on one worker.
type stream struct {
	call  *call
	w     *worker
	sides [2]side
	raw   atomic.Bool // not RTP (e.g. udptl): forward without RTP header checks

	kmu    sync.Mutex // orders kernel installs against address changes (kernel.go)
	kflows []kfwd.Key // the stream's flows in the kernel; guarded by kmu
}

// side is one party's end of a stream: the relay sockets that party sends
// to, and where that party receives.
type side struct {
	st        *stream
	other     *side
	rtp, rtcp *sock
	// remote[0] is where the party receives RTP, remote[1] RTCP. Control
	// replaces them when the party's SDP changes; the worker when it latches.
	remote [2]atomic.Pointer[peer]
	// sdp[i] is the address the party's SDP gave last (control only).
	sdp [2]netip.AddrPort
	sig netip.Addr  // where the party's signalling came from, if known (control only)
	mux atomic.Bool // the party multiplexes RTCP on its RTP port (a=rtcp-mux)
	// latch says which sources the worker may latch onto (latch.go);
	// replaced by control, read by the worker.
	latch atomic.Pointer[latchPolicy]
}

// peer is an immutable destination.
type peer struct {
	addr    rawAddr
	ap      netip.AddrPort
	latched bool // learned from the party's own packets
}

// update records the party's media description m. Addresses that did not
// change keep what was latched, so a re-INVITE does not undo NAT learning.
func (s *side) update(m sdpMedia, local netip.Addr) {
	s.mux.Store(m.mux)
	for i, ap := range [2]netip.AddrPort{m.rtpAddr, m.rtcpAddr} {
		if ap == s.sdp[i] && s.remote[i].Load() != nil {
			continue
		}
		s.sdp[i] = ap
		if !ap.IsValid() || ap.Addr().IsUnspecified() || ap.Port() == 0 || ap.Addr().Is4() != local.Is4() {
			s.remote[i].Store(&peer{}) // unknown until the party sends
			continue
		}
		s.remote[i].Store(&peer{addr: toRaw(ap), ap: ap})
	}
}

// known reports whether p is a destination.
func (p *peer) known() bool { return p != nil && p.ap.IsValid() }
