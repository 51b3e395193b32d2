package node

import (
	"net"
	"net/netip"
	"strconv"
)

// ownAddrs are the node's SIP and HTTP addresses as bound (or as
// configured before they are), for the links' destination policy.
func (n *Node) ownAddrs() []netip.AddrPort {
	sipAddr, httpAddr := n.cfg.SIP.Listen, n.cfg.HTTP.Addr
	if n.sip != nil {
		sipAddr = n.sip.Addr()
	}
	if n.ln != nil {
		httpAddr = n.ln.Addr().String()
	}
	return ownAddrs(sipAddr, httpAddr)
}

// ownAddrs are the node's listening addresses besides its media sockets
// (SIP, HTTP), for the links' destination policy: no link may send to
// them. A host name or an empty host stands for every address of the host.
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
