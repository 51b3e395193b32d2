package sip

import (
	"bytes"
	"hash/fnv"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// Stateless forwarding of in-dialog ACK and BYE over UDP (RFC 3261 16.11).
//
// Once a call is set up, its ACK and BYE come back along our
// Record-Route. Forwarding them through sipgo's transactions costs a server
// and a client transaction per request (most of a call's CPU beside the
// INVITE); a stateless proxy forwards them as they come, with a Via branch
// derived from the incoming one so a retransmission gets the same branch,
// and passes the responses back by their Via (unhandledResponse). Kamailio
// forwards in-dialog requests the same way when its script does not create
// a transaction for them.

// inDialogCandidate reports, from the raw bytes, whether a UDP datagram is
// an ACK or BYE for the stateless path: it carries a Route header and its
// Request-URI is not one of ours (so it is not the hop-by-hop ACK of a
// response we sent, which its server transaction must absorb).
func (s *Server) inDialogCandidate(data []byte) bool {
	if !bytes.HasPrefix(data, []byte("ACK ")) && !bytes.HasPrefix(data, []byte("BYE ")) {
		return false
	}
	line, rest, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return false
	}
	f := bytes.Fields(line)
	if len(f) != 3 {
		return false
	}
	host, port := uriHostPort(string(f[1]))
	if host == "" || strings.EqualFold(host, s.o.Domain) || (host == s.o.Advertise && (port == s.port || port == 0)) {
		return false
	}
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\n"))
		if len(l) <= 1 { // end of headers
			return false
		}
		if len(l) > 6 && (l[0] == 'R' || l[0] == 'r') && bytes.EqualFold(l[:6], []byte("route:")) {
			return true
		}
	}
	return false
}

// uriHostPort returns the host and port (0 when absent) of a sip: or sips:
// URI, or "" for anything else.
func uriHostPort(uri string) (string, int) {
	rest, ok := strings.CutPrefix(uri, "sip:")
	if !ok {
		if rest, ok = strings.CutPrefix(uri, "sips:"); !ok {
			return "", 0
		}
	}
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.IndexAny(rest, ";?>"); i >= 0 {
		rest = rest[:i]
	}
	host, portStr := rest, ""
	if strings.HasPrefix(rest, "[") {
		i := strings.IndexByte(rest, ']')
		if i < 0 {
			return "", 0
		}
		host, portStr = rest[1:i], strings.TrimPrefix(rest[i+1:], ":")
	} else if i := strings.IndexByte(rest, ':'); i >= 0 {
		host, portStr = rest[:i], rest[i+1:]
	}
	port, _ := strconv.Atoi(portStr)
	return host, port
}

// handleUDPInDialog forwards an in-dialog ACK or BYE statelessly.
func (s *Server) handleUDPInDialog(job udpJob) {
	msg, err := s.parser.ParseSIP(job.data)
	if err != nil {
		s.m.badMessages.Inc()
		return
	}
	req, ok := msg.(*sip.Request)
	if !ok {
		return
	}
	src := job.from.String()
	req.SetTransport("UDP")
	req.SetSource(src)
	s.m.requests.WithLabelValues(methodLabel(req.Method)).Inc()
	if code, reason := s.check(req); code != 0 {
		s.m.badMessages.Inc()
		if !req.IsAck() && req.Via() != nil && req.CSeq() != nil {
			s.writeUDP(s.reject(req, code, reason), job.from)
		}
		return
	}
	if !s.allowOther(req) {
		if !req.IsAck() {
			s.writeUDP(s.overloaded(req), job.from)
		}
		return
	}
	fixVia(req)
	popped, token := s.popRoute(req)
	if !popped || !hasToTag(req) {
		if !req.IsAck() {
			s.writeUDP(sip.NewResponseFromRequest(req, sip.StatusNotFound, "Not Here", nil), job.from)
		}
		return
	}
	if !s.ourDialog(req, token) {
		if res := s.denyRoute(req); res != nil {
			s.writeUDP(res, job.from)
		}
		return
	}
	if mf := req.MaxForwards(); mf != nil {
		if mf.Val() <= 1 {
			if !req.IsAck() {
				s.writeUDP(sip.NewResponseFromRequest(req, sip.StatusTooManyHops, "Too Many Hops", nil), job.from)
			}
			return
		}
		mf.Dec()
	}
	t := s.nextHop(req)
	// RFC 3261 16.11: the branch of a stateless proxy is a function of the
	// incoming request, so retransmissions are forwarded identically.
	h := fnv.New64a()
	if v := req.Via(); v != nil {
		b, _ := v.Params.Get("branch")
		h.Write([]byte(b))
	}
	h.Write([]byte(req.Method))
	via := &sip.ViaHeader{ProtocolName: "SIP", ProtocolVersion: "2.0", Transport: toUpper(t.transport),
		Host: s.o.Advertise, Port: s.port, Params: sip.HeaderParams{{K: "branch", V: "z9hG4bK-sl" + strconv.FormatUint(h.Sum64(), 36)}}}
	req.PrependHeader(via)
	s.lateAnswer(req)
	if req.Method == sip.BYE {
		// After the BYE is on its way; ending the media does not wait.
		defer s.endCall(string(*req.CallID()))
	}
	if t.transport == "udp" {
		if ap, err := netip.ParseAddrPort(t.addr); err == nil {
			buf := bufPool.Get().(*bytes.Buffer)
			buf.Reset()
			req.StringWrite(buf)
			if _, err := s.udp.WriteTo(buf.Bytes(), net.UDPAddrFromAddrPort(ap)); err != nil && s.ctx.Err() == nil {
				s.log.Debug("sip: forward", "method", req.Method, "to", t.addr, "err", err)
			}
			bufPool.Put(buf)
			return
		}
	}
	s.route(req, t.transport, t.addr)
	if err := s.tp.WriteMsg(req); err != nil {
		s.log.Debug("sip: forward", "method", req.Method, "to", t.addr, "err", err)
	}
}
