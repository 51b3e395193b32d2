package node

import (
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/convene/convene/internal/bus"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/sip"
)

// Over capacity in a cluster, a refusal names the nodes with room (issue
// 19): the governor asks alternatives, which asks the registry, for the
// refused request's packets/s; the API puts them in its 503, the SFU in
// its error frame (the web app moves there), SIP in a 302's Contact.

// public is where clients reach this node, published in its heartbeats:
// http.public_url (else http://<listener> for a specific IP), the SIP
// server's advertised address, the token key's ID.
func (n *Node) public(tokenKey string) bus.Public {
	p := bus.Public{URL: strings.TrimRight(n.cfg.HTTP.PublicURL, "/"), TokenKey: tokenKey}
	if p.URL == "" {
		if ap, err := netip.ParseAddrPort(n.ln.Addr().String()); err == nil && !ap.Addr().IsUnspecified() {
			p.URL = "http://" + ap.String()
		}
	}
	if n.sip != nil {
		if h, _, err := net.SplitHostPort(n.sip.Addr()); err == nil && h != "" {
			p.SIP = n.sip.Addr()
		}
	}
	return p
}

// alternatives are the nodes with room for a refused request of pps
// packets/s, as the governor's refusals name them; none on a lone node
// (its registry lists only itself).
func (n *Node) alternatives(pps float64) []capacity.Alternative {
	if n.registry == nil {
		return nil
	}
	var out []capacity.Alternative
	for _, o := range n.registry.WithRoom(busToken(n.cfg.NodeID), pps) {
		hb := o.Heartbeat
		out = append(out, capacity.Alternative{Node: o.ID, URL: hb.URL, SIP: hb.SIP, RoomPPS: o.Room(),
			TokenValid: hb.TokenKey != "" && hb.TokenKey == n.tokenKey})
	}
	return out
}

// sipMoved is the refusal err as SIP's redirect to the alternatives that
// have a SIP address, or nil if none has.
func sipMoved(err error) *sip.Moved {
	var r *capacity.Refusal
	if !errors.As(err, &r) {
		return nil
	}
	var to []string
	for _, a := range r.Alternatives {
		if a.SIP != "" {
			to = append(to, a.SIP)
		}
	}
	if len(to) == 0 {
		return nil
	}
	return &sip.Moved{To: to, Err: err}
}

// peerOrigins are the web origins of the cluster's other nodes that take
// this node's tokens (their http.public_url, by their heartbeats): the
// web app's pages may connect to them (webui.HandlerWith), to ask whether
// one answers before a member whose node died rejoins there.
func (n *Node) peerOrigins() []string {
	if n.registry == nil {
		return nil
	}
	self := busToken(n.cfg.NodeID)
	var out []string
	for _, o := range n.registry.Nodes() {
		hb := o.Heartbeat
		if o.ID == self || hb.URL == "" || hb.TokenKey == "" || hb.TokenKey != n.tokenKey {
			continue
		}
		if u, err := url.Parse(hb.URL); err == nil && u.Host != "" {
			out = append(out, u.Scheme+"://"+u.Host)
		}
	}
	return out
}
