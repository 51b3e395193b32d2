package sip

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
)

// register answers a REGISTER (RFC 3261 section 10.3). transport is "udp"
// or "tcp" and source the packet's ip:port. It never returns a nil
// response. A non-zero seq numbers the binding change the answer
// acknowledges: it may be sent only once that change is durable
// (commit.go).
func (s *Server) register(ctx context.Context, req *sip.Request, transport, source string) (*sip.Response, uint64) {
	now := s.o.Now()
	s.m.reqRegister.Inc()
	if srcIP, _ := splitHostPort(source); !s.regLimit.allow(srcIP, now) {
		s.m.rateLimited.WithLabelValues("REGISTER").Inc()
		return s.overloaded(req), 0
	}
	to, callID, cseq := req.To(), req.CallID(), req.CSeq()
	if to == nil || callID == nil || cseq == nil || to.Address.User == "" || req.From() == nil {
		s.m.badMessages.Inc()
		s.m.regFailed.Inc()
		return sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request (missing To user, From, Call-ID or CSeq)", nil), 0
	}

	if !to.Params.Has("tag") {
		// Responses need a To tag (RFC 3261 8.2.6.2); sipgo would make a
		// UUID, which costs more than the rest of the response.
		to.Params.Add("tag", s.nextTag())
	}
	auth := s.authenticate(ctx, req, "Authorization")
	if auth.badURI {
		s.m.regFailed.Inc()
		return sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request (digest uri is not the Request-URI)", nil), 0
	}
	if !auth.ok {
		res := sip.NewResponseFromRequest(req, sip.StatusUnauthorized, "Unauthorized", nil)
		s.challenge(res, "WWW-Authenticate", auth.stale)
		if auth.fail != "" && !auth.stale {
			s.m.regFailed.Inc()
		} else {
			s.m.regChallenged.Inc()
		}
		return res, 0
	}
	user := auth.user
	if to.Address.User != user {
		s.m.authFailures.WithLabelValues("forbidden").Inc()
		s.m.regFailed.Inc()
		return sip.NewResponseFromRequest(req, sip.StatusForbidden, "Forbidden (To is not the authenticated user)", nil), 0
	}
	upd, res := s.parseContacts(req, user, transport, source, now)
	if res != nil {
		s.m.regFailed.Inc()
		return res, 0
	}
	return s.applyRegister(req, user, upd, now)
}

// regUpdate is what one REGISTER asks of the location service.
type regUpdate struct {
	changes   []regChange
	removeAll bool // Contact: *
}

// parseContacts reads the bindings a REGISTER of user asks for (RFC 3261
// section 10.3 step 6), or returns the answer refusing it (400, 423).
func (s *Server) parseContacts(req *sip.Request, user, transport, source string, now time.Time) (regUpdate, *sip.Response) {
	srcIP, srcPort := splitHostPort(source)
	callID, cseq := req.CallID(), req.CSeq()
	var upd regUpdate
	defExpires := s.o.Expires
	if h := req.GetHeader("Expires"); h != nil {
		v, err := strconv.ParseUint(strings.TrimSpace(h.Value()), 10, 32)
		if err != nil {
			s.m.badMessages.Inc()
			return upd, sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request (Expires)", nil)
		}
		defExpires = time.Duration(v) * time.Second
	}

	via := req.Via()
	viaNAT := via == nil || via.Host != srcIP || (transport == "udp" && via.Port != 0 && via.Port != srcPort)
	ua := ""
	if h := req.GetHeader("User-Agent"); h != nil {
		ua = h.Value()
		if len(ua) > 200 {
			ua = ua[:200]
		}
	}

	contacts := req.GetHeaders("Contact")
	for _, h := range contacts {
		c, ok := h.(*sip.ContactHeader)
		if !ok {
			continue
		}
		if c.Address.Wildcard {
			if len(contacts) != 1 || defExpires != 0 {
				s.m.badMessages.Inc()
				return upd, sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request (Contact: * needs Expires: 0 alone)", nil)
			}
			upd.removeAll = true
			break
		}
		exp := defExpires
		if v, ok := c.Params.Get("expires"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil {
				s.m.badMessages.Inc()
				return upd, sip.NewResponseFromRequest(req, sip.StatusBadRequest, "Bad Request (Contact expires)", nil)
			}
			exp = time.Duration(n) * time.Second
		}
		contactURI := c.Address.String()
		if exp == 0 {
			upd.changes = append(upd.changes, regChange{b: &binding{user: user, contact: contactURI}, remove: true})
			continue
		}
		if exp < s.o.MinExpires {
			res := sip.NewResponseFromRequest(req, sip.StatusIntervalToBrief, "Interval Too Brief", nil)
			res.AppendHeader(sip.NewHeader("Min-Expires", strconv.Itoa(int(s.o.MinExpires/time.Second))))
			return upd, res
		}
		nat := viaNAT || c.Address.Host != srcIP
		exp = min(exp, s.o.MaxExpires)
		if nat {
			exp = min(exp, s.o.NATExpires)
		}
		upd.changes = append(upd.changes, regChange{b: &binding{user: user, contact: contactURI, uri: *c.Address.Clone(),
			callID: string(*callID), cseq: cseq.SeqNo, expires: now.Add(exp), transport: transport, source: source,
			nat: nat, userAgent: ua, updated: now}})
	}
	return upd, nil
}

// applyRegister makes the REGISTER's changes (steps 7-8) and answers 200
// with every current contact; seq numbers the change the answer waits for.
func (s *Server) applyRegister(req *sip.Request, user string, upd regUpdate, now time.Time) (*sip.Response, uint64) {
	callID, cseq := req.CallID(), req.CSeq()
	current, outcome, seq := s.loc.apply(user, string(*callID), cseq.SeqNo, upd.removeAll, upd.changes, now, s.o.MaxContacts)
	switch outcome {
	case regOutOfOrder:
		s.m.regFailed.Inc()
		return sip.NewResponseFromRequest(req, sip.StatusInternalServerError, "Server Error (CSeq out of order)", nil), 0
	case regTooMany:
		s.m.regFailed.Inc()
		s.m.denied.WithLabelValues("contacts").Inc()
		return sip.NewResponseFromRequest(req, sip.StatusForbidden,
			"Forbidden (more than "+strconv.Itoa(s.o.MaxContacts)+" contacts for this account)", nil), 0
	}
	s.m.registrations.Set(float64(s.loc.size()))
	s.m.regOK.Inc()
	res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil)
	for i := range current {
		b := &current[i]
		left := int(b.expires.Sub(now).Round(time.Second) / time.Second)
		ch := &sip.ContactHeader{Address: b.uri}
		ch.Params.Add("expires", strconv.Itoa(max(left, 0)))
		res.AppendHeader(ch)
	}
	res.AppendHeader(sip.NewHeader("Date", s.date(now)))
	return res, seq
}

const http1123 = "Mon, 02 Jan 2006 15:04:05 GMT"

// date formats now for the Date header, once per second.
func (s *Server) date(now time.Time) string {
	sec := now.Unix()
	if d := s.dateCache.Load(); d != nil && d.sec == sec {
		return d.s
	}
	d := &cachedDate{sec: sec, s: now.UTC().Format(http1123)}
	s.dateCache.Store(d)
	return d.s
}

type cachedDate struct {
	sec int64
	s   string
}

// nextTag returns a unique tag: this server's random prefix and a counter.
func (s *Server) nextTag() string {
	return s.tagPrefix + strconv.FormatUint(s.tagSeq.Add(1), 36)
}

// overloaded is the 503 of a rate-limited request.
func (s *Server) overloaded(req *sip.Request) *sip.Response {
	res := sip.NewResponseFromRequest(req, sip.StatusServiceUnavailable, "Service Unavailable (rate limit)", nil)
	res.AppendHeader(sip.NewHeader("Retry-After", strconv.Itoa(int(max(s.o.RetryAfter/time.Second, 1)))))
	return res
}

// splitHostPort splits ip:port; port is 0 when missing.
func splitHostPort(addr string) (string, int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func hostPort(host string, port int) string {
	return net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(port))
}
