package node

import (
	"net"
	"net/netip"
	"strconv"
)

// ownAddrs are the node's SIP address as bound (or as configured before
// it is), for the links' destination policy. A link sends UDP, so only
// the node's UDP listeners besides its media sockets (those the policy
// knows already) could make a loop: SIP. The HTTP port is TCP's alone; a
// datagram sent to its number reaches whatever UDP socket has that number
// (an endpoint on the same host may), never the node.
func (n *Node) ownAddrs() []netip.AddrPort {
	sipAddr := n.cfg.SIP.Listen
	if n.sip != nil {
		sipAddr = n.sip.Addr()
	}
	return ownAddrs(sipAddr)
}

// ownAddrs parses the node's listening addresses besides its media
// sockets, for the links' destination policy: no link may send to them. A host name or an empty host stands for every address of the host.
func ownAddrs(hostports ...string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, hp := range hostports {
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			continue
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			continue
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			a = netip.IPv4Unspecified()
		}
		out = append(out, netip.AddrPortFrom(a.Unmap(), uint16(p)))
	}
	return out
}
