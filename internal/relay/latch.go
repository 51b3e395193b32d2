package relay

import (
	"net/netip"
	"time"
)

// Latching (symmetric RTP, RFC 4961; issue 11 "media hijack"). A side's
// media goes to the address the relay latched onto for it: the source of
// packets it accepted from that party. Whoever sent first used to win, so a
// third party that guessed a relay port received the other party's audio.
// Now a source is accepted for a side only if
//
//   - its IP is the one the side's SDP gave for that port (RTP or RTCP), or
//     the IP its offer's signalling came from; such a source may also take
//     over from an established one (the party moved, or NAT rebound its
//     port); or
//   - the side has not latched yet, its SDP address cannot be the real one
//     (private, CGNAT, link-local, unspecified or unknown: the party is
//     behind NAT), and the learning window, Options.LatchWindow after the
//     last offer or answer of the call, is still open.
//
// Anything else is dropped and counted: reason "source" when the side had
// latched onto another address, "refused_source" when it had not.

// latchPolicy is what the worker checks a new source against; immutable,
// replaced by control (side.learn).
type latchPolicy struct {
	ip    [2]netip.Addr // the SDP's RTP and RTCP addresses (invalid if unknown)
	sig   netip.Addr    // the signalling source, if known
	nat   [2]bool       // the SDP address is private or unknown: learning allowed
	until time.Time     // end of the learning window
}

// learn recomputes s's policy from its SDP and signalling source and opens
// a learning window until the given time. Control only (Relay.mu held).
func (s *side) learn(until time.Time, local netip.Addr) {
	p := &latchPolicy{sig: s.sig, until: until}
	for i, ap := range s.sdp {
		if ap.IsValid() && !ap.Addr().IsUnspecified() {
			p.ip[i] = ap.Addr().Unmap()
		}
		p.nat[i] = behindNAT(ap, local)
	}
	s.latch.Store(p)
}

// behindNAT reports whether an SDP address says its party is not reachable
// there as is: private (RFC 1918, RFC 4193), shared (RFC 6598), link-local,
// unspecified, unknown, or of the other IP family than the relay's.
func behindNAT(ap netip.AddrPort, local netip.Addr) bool {
	if !ap.IsValid() || ap.Port() == 0 {
		return true
	}
	a := ap.Addr().Unmap()
	return a.IsUnspecified() || a.IsPrivate() || a.IsLinkLocalUnicast() || cgnat.Contains(a) || a.Is4() != local.Is4()
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598 shared address space

// mayLatch reports whether the worker may latch side s's port idx (0 RTP,
// 1 RTCP) onto src; latched says whether it has latched onto another
// source already; now is the relay's clock.
func (s *side) mayLatch(idx int, src netip.AddrPort, latched bool, now func() time.Time) bool {
	p := s.latch.Load()
	if p == nil {
		return false
	}
	ip := src.Addr()
	if ip == p.ip[idx] || (p.sig.IsValid() && ip == p.sig) {
		return true
	}
	return !latched && p.nat[idx] && now().Before(p.until)
}
