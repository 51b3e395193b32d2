package sip

import (
	"bytes"
	"net"
	"net/netip"
	"strings"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/convene/convene/internal/sip/digest"
)

// routes installs the request handlers on sipgo's server.
func (s *Server) routes() {
	for _, m := range []sip.RequestMethod{sip.REGISTER, sip.INVITE, sip.ACK, sip.CANCEL} {
		s.srv.OnRequest(m, s.handlerFor(m))
	}
	s.srv.OnNoRoute(s.handlerFor(""))
}

// handlerFor returns the handler of a method ("" for every other).
func (s *Server) handlerFor(m sip.RequestMethod) sipgo.RequestHandler {
	switch m {
	case sip.REGISTER:
		return s.wrap(func(req *sip.Request, tx sip.ServerTransaction) {
			res, seq := s.register(s.ctx, req, strings.ToLower(req.Transport()), req.Source())
			if seq != 0 && s.awaitCommit(s.ctx, seq) != nil {
				res = s.notStored(req)
			}
			s.respond(tx, res)
		}, false)
	case sip.INVITE:
		return s.wrap(s.onInvite, true)
	case sip.ACK:
		return s.wrap(s.onAck, true)
	case sip.CANCEL:
		return s.wrap(func(req *sip.Request, tx sip.ServerTransaction) {
			// A CANCEL that matched a transaction was answered by sipgo.
			s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusCallTransactionDoesNotExists,
				"Call/Transaction Does Not Exist", nil))
		}, true)
	}
	return s.wrap(s.onOther, true)
}

// wrap checks and prepares every request taken through sipgo: it must be
// well formed, gets received/rport, and is counted.
func (s *Server) wrap(h sipgo.RequestHandler, count bool) sipgo.RequestHandler {
	return func(req *sip.Request, tx sip.ServerTransaction) {
		if count {
			s.m.requests.WithLabelValues(methodLabel(req.Method)).Inc()
		}
		if code, reason := s.check(req); code != 0 {
			s.m.badMessages.Inc()
			if !req.IsAck() {
				s.respond(tx, s.reject(req, code, reason))
			}
			return
		}
		if req.Method != sip.REGISTER && req.Method != sip.INVITE && !s.allowOther(req) {
			if !req.IsAck() {
				s.respond(tx, s.overloaded(req))
			}
			return
		}
		fixVia(req)
		h(req, tx)
	}
}

// allowOther applies the per-source limit of every method but REGISTER and
// INVITE, which have limits of their own.
func (s *Server) allowOther(req *sip.Request) bool {
	src, _ := splitHostPort(req.Source())
	if s.otherLimit.allow(src, s.o.Now()) {
		return true
	}
	s.m.rateLimited.WithLabelValues(methodLabel(req.Method)).Inc()
	return false
}

func methodLabel(m sip.RequestMethod) string {
	switch m {
	case sip.INVITE, sip.ACK, sip.BYE, sip.CANCEL, sip.REGISTER, sip.OPTIONS, sip.MESSAGE, sip.UPDATE,
		sip.INFO, sip.PRACK, sip.SUBSCRIBE, sip.NOTIFY, sip.REFER, sip.PUBLISH:
		return string(m)
	}
	return "other"
}

func (s *Server) respond(tx sip.ServerTransaction, res *sip.Response) {
	if tx == nil {
		return
	}
	if err := tx.Respond(res); err != nil && s.ctx.Err() == nil {
		s.log.Debug("sip: respond", "status", res.StatusCode, "err", err)
	}
}

// isUs reports whether uri names this proxy (for Route) or its domain.
func (s *Server) isUs(uri *sip.Uri) bool {
	host := strings.Trim(uri.Host, "[]")
	if host != s.o.Advertise && !strings.EqualFold(host, s.o.Domain) {
		return false
	}
	return uri.Port == 0 || uri.Port == s.port
}

// popRoute removes the top Routes that name us (loose routing, RFC 3261
// 16.4); it reports whether the request was routed through us, and the
// dialog token the first of them carried (dialog.go).
func (s *Server) popRoute(req *sip.Request) (popped bool, token string) {
	for {
		r := req.Route()
		if r == nil || !s.isUs(&r.Address) {
			return popped, token
		}
		if token == "" {
			token, _ = r.Address.UriParams.Get(rrParam)
		}
		req.RemoveHeader("Route")
		popped = true
	}
}

func (s *Server) onInvite(req *sip.Request, tx sip.ServerTransaction) {
	src, _ := splitHostPort(req.Source())
	if !s.invLimit.allow(src, s.o.Now()) {
		s.m.rateLimited.WithLabelValues("INVITE").Inc()
		s.respond(tx, s.overloaded(req))
		return
	}
	if hasToTag(req) {
		if !s.confInDialog(req, tx) {
			s.inDialog(req, tx)
		}
		return
	}
	s.popRoute(req)
	if req.Route() != nil {
		// Pre-loaded route to somewhere else: we are not an open relay.
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusForbidden, "Forbidden (relaying denied)", nil))
		return
	}
	s.toUser(req, tx)
}

// toUser proxies an out-of-dialog request to every contact of the user in
// the Request-URI (RFC 3261 16.5-16.6).
func (s *Server) toUser(req *sip.Request, tx sip.ServerTransaction) {
	invite := req.IsInvite()
	if !s.isUs(&sip.Uri{Host: req.Recipient.Host, Port: req.Recipient.Port}) {
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusForbidden, "Forbidden (relaying denied)", nil))
		return
	}
	if mf := req.MaxForwards(); mf != nil && mf.Val() <= 1 {
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusTooManyHops, "Too Many Hops", nil))
		return
	}
	subscribe := req.Method == sip.SUBSCRIBE
	conference := (invite || subscribe) && s.o.Conferences != nil && s.o.Conferences.IsConference(s.ctx, req.Recipient.User)
	authUser := ""
	if invite && s.o.AuthCalls || conference {
		var accounts digest.Accounts = s.o.Users
		if conference {
			pins, _ := s.o.Conferences.(GuestPINs)
			accounts = confAccounts{users: s.o.Users, pins: pins, session: req.Recipient.User, realm: s.o.Domain}
		}
		a := s.authenticateWith(s.ctx, accounts, req, "Proxy-Authorization")
		if a.badURI {
			s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request (digest uri is not the Request-URI)", nil))
			return
		}
		if !a.ok {
			res := sip.NewResponseFromRequest(req, sip.StatusProxyAuthRequired, "Proxy Authentication Required", nil)
			s.challenge(res, "Proxy-Authenticate", a.stale)
			if req.Transport() == "UDP" {
				res = bounded(req, res, requestLen(req))
			}
			s.respond(tx, res)
			return
		}
		req.RemoveHeader("Proxy-Authorization")
		authUser = a.user
	}
	if conference && subscribe {
		s.subscribeConference(req, tx, req.Recipient.User)
		return
	}
	if conference {
		s.joinConference(req, tx, req.Recipient.User, authUser)
		return
	}
	user := req.Recipient.User
	_, found, err := s.o.Users.Lookup(s.ctx, user)
	switch {
	case err != nil:
		s.log.Warn("sip: user lookup", "user", user, "err", err)
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusInternalServerError, "Server Error", nil))
		return
	case !found || user == "":
		if invite {
			s.m.calls.WithLabelValues("not_found").Inc()
		}
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusNotFound, "Not Found", nil))
		return
	}
	bs := s.loc.lookup(user, s.o.Now())
	if len(bs) == 0 {
		if invite {
			s.m.calls.WithLabelValues("unavailable").Inc()
		}
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusTemporarilyUnavailable, "Temporarily Unavailable", nil))
		return
	}
	targets := make([]target, 0, len(bs))
	for i := range bs {
		b := &bs[i]
		tp, addr := b.dest()
		targets = append(targets, target{uri: b.uri, transport: tp, addr: addr, user: b.user, contact: b.contact})
	}
	rr := invite || req.Method == sip.SUBSCRIBE || req.Method == sip.REFER
	s.fork(req, tx, targets, forkOpts{recordRoute: rr, initial: invite, relay: invite && authUser != "", user: authUser})
}

// inDialog forwards a request inside a dialog we record-routed; any other
// is refused before its next hop is looked at.
func (s *Server) inDialog(req *sip.Request, tx sip.ServerTransaction) {
	popped, token := s.popRoute(req)
	if !popped {
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusNotFound, "Not Here", nil))
		return
	}
	if !s.ourDialog(req, token) {
		s.respond(tx, s.denyRoute(req))
		return
	}
	if mf := req.MaxForwards(); mf != nil && mf.Val() <= 1 {
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusTooManyHops, "Too Many Hops", nil))
		return
	}
	t := s.nextHop(req)
	user, relay := s.calls.relayUser(string(*req.CallID()))
	s.fork(req, tx, []target{t}, forkOpts{relay: relay, user: user})
}

// nextHop is where a routed request goes: the next Route, else the
// Request-URI, reached at its registration's source if it is a NATed
// contact of ours.
func (s *Server) nextHop(req *sip.Request) target {
	uri := req.Recipient
	if r := req.Route(); r != nil {
		uri = r.Address
	} else if b, ok := s.loc.byContactURI(req.Recipient.String()); ok {
		tp, addr := b.dest()
		return target{uri: req.Recipient, transport: tp, addr: addr, user: b.user, contact: b.contact}
	}
	tp := "udp"
	if t, ok := uri.UriParams.Get("transport"); ok && t != "" {
		tp = strings.ToLower(t)
	}
	port := uri.Port
	if port == 0 {
		port = 5060
	}
	return target{uri: req.Recipient, transport: tp, addr: hostPort(uri.Host, port)}
}

func (s *Server) onAck(req *sip.Request, tx sip.ServerTransaction) {
	// An ACK for a 2xx is its own transaction and is forwarded statelessly
	// (RFC 3261 16.11); the ACK of a non-2xx is absorbed by sipgo.
	popped, token := s.popRoute(req)
	if !popped {
		return
	}
	if !s.ourDialog(req, token) {
		s.denyRoute(req)
		return
	}
	t := s.nextHop(req)
	out := req.Clone()
	out.SetBody(req.Body())
	s.lateAnswer(out)
	if mf := out.MaxForwards(); mf != nil {
		mf.Dec()
	}
	s.route(out, t.transport, t.addr)
	if err := s.client.WriteRequest(out, sipgo.ClientRequestAddVia); err != nil {
		s.log.Debug("sip: forward ACK", "to", t.addr, "err", err)
	}
}

// onOther handles every other method: in-dialog requests are routed,
// OPTIONS to the server is answered, the rest goes to the user.
func (s *Server) onOther(req *sip.Request, tx sip.ServerTransaction) {
	if hasToTag(req) {
		if !s.confInDialog(req, tx) && !s.confSubInDialog(req, tx) {
			s.inDialog(req, tx)
		}
		return
	}
	s.popRoute(req)
	if req.Route() != nil {
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusForbidden, "Forbidden (relaying denied)", nil))
		return
	}
	if req.Method == sip.OPTIONS && req.Recipient.User == "" {
		res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil)
		res.AppendHeader(sip.NewHeader("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS, REGISTER, MESSAGE, UPDATE, INFO"))
		if req.Transport() == "UDP" {
			res = bounded(req, res, requestLen(req))
		}
		s.respond(tx, res)
		return
	}
	if req.Recipient.User == "" {
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusMethodNotAllowed, "Method Not Allowed", nil))
		return
	}
	s.toUser(req, tx)
}

func hasToTag(req *sip.Request) bool {
	to := req.To()
	return to != nil && to.Params.Has("tag")
}

// unhandledResponse forwards responses that match no client transaction
// statelessly by their Via: those of requests forwarded statelessly
// (stateless.go) and late 2xx retransmissions (RFC 3261 16.7 step 9).
func (s *Server) unhandledResponse(res *sip.Response) {
	via := res.Via()
	if via == nil || strings.Trim(via.Host, "[]") != s.o.Advertise || via.Port != s.port {
		return
	}
	b, _ := via.Params.Get("branch")
	if !res.IsSuccess() && !strings.HasPrefix(b, "z9hG4bK-sl") {
		return
	}
	out := res
	out.RemoveHeader("Via")
	if out.Via() == nil {
		return
	}
	out.SetDestination("")
	out.SetTransport("")
	s.writeResponse(out)
}

// writeResponse sends a response statelessly to its top Via: straight from
// the UDP listener when it names an IP address, else through sipgo.
func (s *Server) writeResponse(out *sip.Response) {
	if v := out.Via(); v != nil && strings.EqualFold(v.Transport, "UDP") {
		if ap, err := netip.ParseAddrPort(out.Destination()); err == nil {
			buf := bufPool.Get().(*bytes.Buffer)
			buf.Reset()
			out.StringWrite(buf)
			_, err := s.udp.WriteTo(buf.Bytes(), net.UDPAddrFromAddrPort(ap))
			bufPool.Put(buf)
			if err != nil && s.ctx.Err() == nil {
				s.log.Debug("sip: forward response", "err", err)
			}
			return
		}
	}
	if err := s.tp.WriteMsg(out); err != nil {
		s.log.Debug("sip: forward response", "err", err)
	}
}
