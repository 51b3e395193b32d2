package relay

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/pion/sdp/v3"
)

// Bounds on what one SDP body may ask of the relay.
const (
	maxSDPBytes = 64 << 10
	maxMedia    = 16
)

// sdpDesc is a parsed SDP body and what the relay needs from each m= line.
type sdpDesc struct {
	s     sdp.SessionDescription
	media []sdpMedia
}

// sdpMedia is one m= line as the relay sees it.
type sdpMedia struct {
	port     int            // the m= port; 0 means the stream is disabled
	rtpAddr  netip.AddrPort // where the party receives RTP
	rtcpAddr netip.AddrPort // and RTCP: a=rtcp (RFC 3605), else RTP port + 1
	mux      bool           // a=rtcp-mux (RFC 5761)
	rtp      bool           // an RTP profile: packets are checked as RTP/RTCP
	relayed  bool           // carried over UDP, so the relay can forward it
}

// parseSDP parses an SDP body (RFC 4566/8866).
func parseSDP(b []byte) (*sdpDesc, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty body", ErrBadSDP)
	}
	if len(b) > maxSDPBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrBadSDP, len(b), maxSDPBytes)
	}
	d := &sdpDesc{}
	if err := d.s.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSDP, err)
	}
	if len(d.s.MediaDescriptions) == 0 {
		return nil, fmt.Errorf("%w: no m= line", ErrBadSDP)
	}
	if len(d.s.MediaDescriptions) > maxMedia {
		return nil, fmt.Errorf("%w: %d m= lines, at most %d relayed", ErrBadSDP, len(d.s.MediaDescriptions), maxMedia)
	}
	sessAddr, err := connAddr(d.s.ConnectionInformation)
	if err != nil {
		return nil, err
	}
	for i, md := range d.s.MediaDescriptions {
		var m sdpMedia
		m.port = md.MediaName.Port.Value
		if m.port < 0 || m.port > 65535 {
			return nil, fmt.Errorf("%w: m= line %d: port %d", ErrBadSDP, i+1, m.port)
		}
		m.rtp, m.relayed = profile(md.MediaName.Protos)
		addr := sessAddr
		if md.ConnectionInformation != nil {
			if addr, err = connAddr(md.ConnectionInformation); err != nil {
				return nil, err
			}
		}
		if m.port != 0 && m.relayed && !addr.IsValid() {
			return nil, fmt.Errorf("%w: m= line %d has no c= address", ErrBadSDP, i+1)
		}
		if m.port != 0 && addr.IsValid() {
			m.rtpAddr = netip.AddrPortFrom(addr, uint16(m.port))
			m.rtcpAddr = netip.AddrPortFrom(addr, uint16(m.port+1))
		}
		for _, a := range md.Attributes {
			switch a.Key {
			case "rtcp-mux":
				m.mux = true
			case "rtcp":
				if ap, ok := parseRTCPAttr(a.Value, addr); ok {
					m.rtcpAddr = ap
				}
			}
		}
		if m.mux {
			m.rtcpAddr = m.rtpAddr
		}
		d.media = append(d.media, m)
	}
	return d, nil
}

// profile tells from an m= line's proto (RTP/AVP, UDP/TLS/RTP/SAVPF, udptl,
// TCP/MSRP, …) whether it is RTP and whether it runs over UDP.
func profile(protos []string) (rtp, udp bool) {
	if len(protos) == 0 {
		return false, false
	}
	for _, p := range protos {
		if strings.EqualFold(p, "RTP") {
			rtp = true
		}
	}
	switch strings.ToUpper(protos[0]) {
	case "RTP", "UDP", "UDPTL":
		udp = true
	}
	return rtp, udp
}

// connAddr returns the address of a c= line; the zero Addr if c is nil.
func connAddr(c *sdp.ConnectionInformation) (netip.Addr, error) {
	if c == nil {
		return netip.Addr{}, nil
	}
	if c.NetworkType != "IN" || (c.AddressType != "IP4" && c.AddressType != "IP6") || c.Address == nil {
		return netip.Addr{}, fmt.Errorf("%w: c=%s: want IN IP4 or IN IP6 and an address", ErrBadSDP, c)
	}
	a, err := netip.ParseAddr(c.Address.Address)
	if err != nil || a.Is4() != (c.AddressType == "IP4") || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%w: c=%s: want a numeric %s address", ErrBadSDP, c, c.AddressType)
	}
	return a.Unmap(), nil
}

// parseRTCPAttr parses the value of a=rtcp:<port> [IN IP4|IP6 <address>]
// (RFC 3605 §2.1); def is the address when none is given.
func parseRTCPAttr(v string, def netip.Addr) (netip.AddrPort, bool) {
	f := strings.Fields(v)
	if len(f) == 0 {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(f[0], 10, 16)
	if err != nil || port == 0 {
		return netip.AddrPort{}, false
	}
	addr := def
	if len(f) == 4 && f[1] == "IN" {
		a, err := netip.ParseAddr(f[3])
		if err != nil {
			return netip.AddrPort{}, false
		}
		addr = a.Unmap()
	}
	if !addr.IsValid() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr, uint16(port)), true
}

// iceAttrs are dropped from rewritten SDP: the relay's address is the only
// candidate, and ICE checks between the parties would fail through it.
var iceAttrs = map[string]bool{
	"candidate": true, "remote-candidates": true, "end-of-candidates": true,
	"ice-ufrag": true, "ice-pwd": true, "ice-lite": true, "ice-options": true, "ice-mismatch": true,
}

// rewrite points d at the relay: c= lines at local, the m= port of line i at
// ports[i] (0 leaves a disabled line disabled and disables what the relay
// cannot carry), a=rtcp at ports[i]+1, ICE attributes dropped. It returns the
// new body.
func (d *sdpDesc) rewrite(local netip.Addr, ports []int) ([]byte, error) {
	addrType := "IP4"
	if !local.Is4() {
		addrType = "IP6"
	}
	conn := func() *sdp.ConnectionInformation {
		return &sdp.ConnectionInformation{NetworkType: "IN", AddressType: addrType,
			Address: &sdp.Address{Address: local.String()}}
	}
	hasSessConn := d.s.ConnectionInformation != nil
	if hasSessConn {
		d.s.ConnectionInformation = conn()
	}
	d.s.Attributes = dropICE(d.s.Attributes)
	for i, md := range d.s.MediaDescriptions {
		port := 0
		if i < len(ports) {
			port = ports[i]
		}
		md.MediaName.Port = sdp.RangedPort{Value: port}
		if port == 0 {
			continue
		}
		if md.ConnectionInformation != nil || !hasSessConn {
			md.ConnectionInformation = conn()
		}
		attrs := dropICE(md.Attributes)
		for j, a := range attrs {
			if a.Key == "rtcp" {
				attrs[j].Value = fmt.Sprintf("%d IN %s %s", port+1, addrType, local)
			}
		}
		md.Attributes = attrs
	}
	return d.s.Marshal()
}

func dropICE(attrs []sdp.Attribute) []sdp.Attribute {
	out := attrs[:0]
	for _, a := range attrs {
		if !iceAttrs[a.Key] {
			out = append(out, a)
		}
	}
	return out
}
