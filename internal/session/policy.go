package session

import (
	"fmt"
	"net"
	"net/netip"
	"time"
)

// LinkPolicy is what the node allows of links that members create with
// their own tokens ("policed" links, NewRTPLink.Policed). Links the
// operator creates are trusted: only the node's own addresses are refused
// to them (a link to itself would loop media), and they need no consent.
type LinkPolicy struct {
	// Allow lists the destinations a policed link may have although they
	// are loopback, link-local, multicast, broadcast or private to the
	// host — e.g. 127.0.0.0/8 for local tools. Empty: none.
	Allow []netip.Prefix
	// Own returns the node's own listening addresses besides its media
	// sockets (SIP, HTTP), asked at each link's creation so that ports
	// bound later or picked by the system count; an unspecified IP stands
	// for every address of the host. No link, policed or not, may send to
	// one of them. Nil: only the media sockets.
	Own func() []netip.AddrPort
	// MaxPerMember caps the links of one member (0: 8); MaxPerSession caps
	// the policed links of one session (0: 64).
	MaxPerMember, MaxPerSession int
	// Consent is how long a policed link's remote may stay silent before
	// the node stops sending to it (0: 30 s); see rtplink.Config.Consent.
	Consent time.Duration
	// LatchWindow is how long after its creation an endpoint behind NAT
	// may be learnt from its first packets (NewRTPLink.Latch; 0: 3 s).
	LatchWindow time.Duration
}

func (p LinkPolicy) latchWindow() time.Duration {
	if p.LatchWindow > 0 {
		return p.LatchWindow
	}
	return 3 * time.Second
}

func (p LinkPolicy) maxPerMember() int {
	if p.MaxPerMember > 0 {
		return p.MaxPerMember
	}
	return 8
}

func (p LinkPolicy) maxPerSession() int {
	if p.MaxPerSession > 0 {
		return p.MaxPerSession
	}
	return 64
}

func (p LinkPolicy) consentTimeout() time.Duration {
	if p.Consent > 0 {
		return p.Consent
	}
	return 30 * time.Second
}

func (p LinkPolicy) allowed(a netip.Addr) bool {
	for _, pr := range p.Allow {
		if pr.Contains(a) {
			return true
		}
	}
	return false
}

// nat64 is the well-known NAT64 prefix (RFC 6052).
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// limitedBroadcast is 255.255.255.255 (RFC 919).
var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// refuseClass says why a policed link may not send to a, or "".
func refuseClass(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "an unspecified address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast(): // 169.254/16 (cloud metadata 169.254.169.254), fe80::/10
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address (use a multicast link)"
	case a == limitedBroadcast:
		return "the limited broadcast address"
	case a.Is4() && a.As4()[0] == 0:
		return "in 0.0.0.0/8, \"this network\" (RFC 1122 §3.2.1.3)"
	case a.Is4() && a.As4()[0] >= 240:
		return "in 240.0.0.0/4, reserved"
	case nat64.Contains(a):
		// 64:ff9b::/96 embeds an IPv4 address (RFC 6052 §2.1): judge that.
		b := a.As16()
		return refuseClass(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	if a.Is4() && isDirectedBroadcast(a) {
		return "a broadcast address of this host's network"
	}
	return ""
}

// isDirectedBroadcast reports whether a is the broadcast address of a
// network this host is on.
func isDirectedBroadcast(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, x := range addrs {
		n, ok := x.(*net.IPNet)
		if !ok || n.IP.To4() == nil {
			continue
		}
		ip, mask := n.IP.To4(), net.IP(n.Mask).To4()
		if mask == nil {
			continue
		}
		var b [4]byte
		for i := range b {
			b[i] = ip[i] | ^mask[i]
		}
		if netip.AddrFrom4(b) == a && ip.String() != a.String() {
			return true
		}
	}
	return false
}

// hostAddr reports whether a is one of this host's addresses.
func hostAddr(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, x := range addrs {
		if n, ok := x.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return true
			}
		}
	}
	return false
}

// own reports whether a is one of the node's own listening addresses: its
// media sockets, or the SIP and HTTP listeners in the policy.
func (s *Service) own(a netip.AddrPort) bool {
	a = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	var own []netip.AddrPort
	if s.o.Links.Own != nil {
		own = s.o.Links.Own()
	}
	if s.o.Sockets.RTP != nil {
		own = append(own, s.o.Sockets.RTP.LocalAddr())
	}
	if s.o.Sockets.RTCP != nil {
		own = append(own, s.o.Sockets.RTCP.LocalAddr())
	}
	for _, o := range own {
		if o.Port() != a.Port() {
			continue
		}
		oa := o.Addr().Unmap()
		if oa == a.Addr() || ((oa.IsUnspecified() || oa.IsLoopback()) && hostAddr(a.Addr())) {
			return true
		}
	}
	return false
}

// checkDestination applies the policy to one destination of a link.
func (s *Service) checkDestination(field string, a netip.AddrPort, policed bool) error {
	if s.own(a) {
		return fmt.Errorf("%w: %s %s is one of this node's own ports", ErrInvalid, field, a)
	}
	if !policed || s.o.Links.allowed(a.Addr().Unmap()) {
		return nil
	}
	if why := refuseClass(a.Addr().Unmap()); why != "" {
		return fmt.Errorf("%w: %s %s is %s, which the node's links.allow_destinations does not allow", ErrInvalid, field, a, why)
	}
	if hostAddr(a.Addr().Unmap()) {
		return fmt.Errorf("%w: %s %s is an address of this node, which links.allow_destinations does not allow", ErrInvalid, field, a)
	}
	return nil
}

// checkRTPDestinations applies the policy to an RTP link's RTP and RTCP
// destinations.
func (s *Service) checkRTPDestinations(req NewRTPLink) error {
	remote, err := parseAddr("remote", req.Remote)
	if err != nil {
		return err
	}
	if err := s.checkDestination("remote", remote, req.Policed); err != nil {
		return err
	}
	rtcp := netip.AddrPortFrom(remote.Addr(), remote.Port()+1)
	field := "remote_rtcp (remote's port + 1)"
	switch {
	case req.RemoteRTCP != "":
		if rtcp, err = parseAddr("remote_rtcp", req.RemoteRTCP); err != nil {
			return err
		}
		field = "remote_rtcp"
	case req.RTCPMux:
		return nil
	}
	return s.checkDestination(field, rtcp, req.Policed)
}

// checkCaps counts a new link against the caps; mu is held.
func (s *Service) checkCaps(ls *liveSession, member string, policed bool) error {
	if member == "" && !policed {
		return nil // the operator's own link: no cap to count against
	}
	var mine, policedN int
	for _, l := range ls.links {
		if l.live {
			continue // a peer connection's tracks; the sfu caps those
		}
		if member != "" && l.member == member {
			mine++
		}
		if l.policed {
			policedN++
		}
	}
	if member != "" && mine >= s.o.Links.maxPerMember() {
		return fmt.Errorf("%w: member %s already has %d links (links.max_per_member)", ErrLimit, member, mine)
	}
	if policed && policedN >= s.o.Links.maxPerSession() {
		return fmt.Errorf("%w: the session already has %d member-created links (links.max_per_session)", ErrLimit, policedN)
	}
	return nil
}
