package sip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
	"github.com/pion/sdp/v3"

	"github.com/convene/convene/internal/sipusers"
)

// Conferences lets phones dial into sessions (INVITE sip:<session>@domain):
// the server authenticates the caller, answers the SDP offer as the
// session's user agent, and hands the media to the session.
type Conferences interface {
	// IsConference reports whether user names a session a phone may join.
	IsConference(ctx context.Context, user string) bool
	// Join makes the caller a member of its session, hearing and
	// speaking through a mixed audio link. It returns the node's media
	// address and the call's member.
	Join(ctx context.Context, c Caller) (local netip.AddrPort, call ConferenceCall, err error)
}

// sourceIP is the IP of a "host:port" a message came from (invalid if
// it is not one).
func sourceIP(hostport string) netip.Addr {
	h, _ := splitHostPort(hostport)
	ip, _ := netip.ParseAddr(strings.Trim(h, "[]"))
	return ip.Unmap()
}

// Caller is a phone joining a session.
type Caller struct {
	Session string
	User    string // the SIP account (or "guest")
	Display string // the name it is shown with
	// Media is where the phone receives RTP (its SDP); Signal is the IP
	// its SIP came from, where its media comes from instead when it is
	// behind NAT (the link latches onto it).
	Media  netip.AddrPort
	Signal netip.Addr
	// Codec is the mix's codec ("PCMU", "opus/48000/2:111");
	// TelephoneEvent the RFC 4733 payload type of its digits (-1: none).
	Codec          string
	TelephoneEvent int
	// Say sends the phone a line of text in a MESSAGE inside its call
	// (the session's chat); it blocks until the phone answers (5 s at
	// most).
	Say func(text string) error
}

// ConferenceCall is a phone's membership of a session.
type ConferenceCall struct {
	// Leave hangs the member up.
	Leave func()
	// Digit takes a digit the phone sent in a SIP INFO; nil ignores them.
	Digit func(digit byte)
	// Text takes what the phone sent in a MESSAGE inside the call (the
	// session's chat); nil answers 501.
	Text func(text string) error
}

// ErrConferenceFull is what a Conferences returns when the session or the
// node cannot take another caller now (503).
var ErrConferenceFull = errors.New("sip: the conference cannot take another caller now")

// Moved is what a Conferences returns to send a caller to other nodes of
// the cluster, which have room for it where this one has none: a 302
// Moved Temporarily whose Contacts are the session at each (RFC 3261
// 21.3.3; the caller retries there, and authenticates there again).
type Moved struct {
	// To are the SIP servers' host:port, preferred first.
	To  []string
	Err error // why not here
}

func (m *Moved) Error() string {
	return fmt.Sprintf("sip: the conference is to be joined through %s: %v", strings.Join(m.To, ", "), m.Err)
}

func (m *Moved) Unwrap() error { return m.Err }

// moved answers an INVITE to session with a 302 naming the session at
// each of mv.To, the first preferred (q 1.0, 0.9, …):
//
//	SIP/2.0 302 Moved Temporarily
//	Contact: <sip:s_1@10.0.0.2:5060>;q=1.0
//	Contact: <sip:s_1@10.0.0.3:5060>;q=0.9
//	Warning: 399 convene "node over capacity: …"
func (s *Server) moved(req *sip.Request, tx sip.ServerTransaction, session string, mv *Moved) {
	s.m.calls.WithLabelValues("conference_moved").Inc()
	res := sip.NewResponseFromRequest(req, sip.StatusMovedTemporarily, "Moved Temporarily", nil)
	for i, to := range mv.To {
		res.AppendHeader(sip.NewHeader("Contact", fmt.Sprintf("<sip:%s@%s>;q=%.1f", session, to, max(1-0.1*float64(i), 0.1))))
	}
	res.AppendHeader(sip.NewHeader("Warning", fmt.Sprintf("399 convene %q", mv.Err.Error())))
	s.respond(tx, res)
}

// confCalls are the calls answered into sessions, by Call-ID.
type confCalls struct {
	mu    sync.Mutex
	calls map[string]ConferenceCall
}

func (c *confCalls) add(callID string, call ConferenceCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]ConferenceCall{}
	}
	c.calls[callID] = call
}

func (c *confCalls) take(callID string) (ConferenceCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.calls[callID]
	delete(c.calls, callID)
	return f, ok
}

func (c *confCalls) get(callID string) (ConferenceCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.calls[callID]
	return f, ok
}

// offer is what the node takes from a phone's SDP offer.
type offer struct {
	remote netip.AddrPort
	codec  string // for the session link ("PCMU", "opus/48000/2:111")
	pt     uint8
	rtpmap string // the answer's a=rtpmap value
	tePT   int    // telephone-event payload type, -1 for none
}

// parseOffer picks the first audio codec of the offer the node mixes
// (PCMU, PCMA, Opus) and the phone's media address.
func parseOffer(body []byte) (offer, error) {
	var d sdp.SessionDescription
	if err := d.Unmarshal(body); err != nil {
		return offer{}, fmt.Errorf("sdp: %w", err)
	}
	for _, m := range d.MediaDescriptions {
		if m.MediaName.Media != "audio" || m.MediaName.Port.Value == 0 {
			continue
		}
		conn := d.ConnectionInformation
		if m.ConnectionInformation != nil {
			conn = m.ConnectionInformation
		}
		if conn == nil || conn.Address == nil {
			return offer{}, errors.New("sdp: no connection address")
		}
		addr, err := netip.ParseAddr(conn.Address.Address)
		if err != nil || addr.IsUnspecified() {
			return offer{}, fmt.Errorf("sdp: connection address %q", conn.Address.Address)
		}
		port := m.MediaName.Port.Value
		if port <= 0 || port > 65535 {
			return offer{}, fmt.Errorf("sdp: port %d", port)
		}
		maps := map[int]string{}
		for _, a := range m.Attributes {
			if a.Key != "rtpmap" {
				continue
			}
			pt, name, ok := strings.Cut(a.Value, " ")
			if n, err := strconv.Atoi(pt); ok && err == nil {
				maps[n] = name
			}
		}
		o := offer{remote: netip.AddrPortFrom(addr, uint16(port)), tePT: -1}
		for pt, name := range maps {
			if strings.HasPrefix(strings.ToLower(name), "telephone-event/8000") {
				o.tePT = pt
			}
		}
		for _, f := range m.MediaName.Formats {
			pt, err := strconv.Atoi(f)
			if err != nil || pt < 0 || pt > 127 {
				continue
			}
			name := maps[pt]
			switch {
			case pt == 0 || strings.EqualFold(name, "PCMU/8000"):
				o.codec, o.rtpmap = "PCMU:"+f, "PCMU/8000"
			case pt == 8 || strings.EqualFold(name, "PCMA/8000"):
				o.codec, o.rtpmap = "PCMA:"+f, "PCMA/8000"
			case pt == 9 || strings.EqualFold(name, "G722/8000"):
				o.codec, o.rtpmap = "G722:"+f, "G722/8000"
			case strings.HasPrefix(strings.ToLower(name), "opus/48000"):
				o.codec, o.rtpmap = "opus/48000/2:"+f, "opus/48000/2"
			default:
				continue
			}
			o.pt = uint8(pt)
			return o, nil
		}
		return offer{}, errors.New("sdp: no audio codec the node mixes (PCMU, PCMA, G722, opus)")
	}
	return offer{}, errors.New("sdp: no audio stream")
}

// answerSDP is the node's answer to o, with its media at local.
func answerSDP(o offer, local netip.AddrPort, id uint64) []byte {
	fmts := strconv.Itoa(int(o.pt))
	if o.tePT >= 0 {
		fmts += " " + strconv.Itoa(o.tePT)
	}
	ip := "IP4"
	if local.Addr().Is6() {
		ip = "IP6"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "v=0\r\no=convene %d 1 IN %s %s\r\ns=convene\r\nc=IN %s %s\r\nt=0 0\r\n", id, ip, local.Addr(), ip, local.Addr())
	fmt.Fprintf(&b, "m=audio %d RTP/AVP %s\r\na=rtpmap:%d %s\r\n", local.Port(), fmts, o.pt, o.rtpmap)
	if o.tePT >= 0 {
		fmt.Fprintf(&b, "a=rtpmap:%d telephone-event/8000\r\na=fmtp:%d 0-16\r\n", o.tePT, o.tePT)
	}
	b.WriteString("a=ptime:20\r\na=sendrecv\r\n")
	return []byte(b.String())
}

// joinConference answers an authenticated INVITE to a session.
func (s *Server) joinConference(req *sip.Request, tx sip.ServerTransaction, session, user string) {
	o, err := parseOffer(req.Body())
	if err != nil {
		s.m.calls.WithLabelValues("conference_refused").Inc()
		res := sip.NewResponseFromRequest(req, sip.StatusNotAcceptableHere, "Not Acceptable Here", nil)
		res.AppendHeader(sip.NewHeader("Warning", fmt.Sprintf("399 convene %q", err.Error())))
		s.respond(tx, res)
		return
	}
	display := user
	if f := req.From(); f != nil && f.DisplayName != "" {
		display = f.DisplayName
	}
	ourTag := sip.GenerateTagN(16)
	if to := req.To(); to != nil {
		if tag, ok := to.Params.Get("tag"); ok && tag != "" {
			ourTag = tag
		}
	}
	dlg := newConfDialog(req, ourTag)
	local, call, err := s.o.Conferences.Join(s.ctx, Caller{Session: session, User: user, Display: display,
		Media: o.remote, Signal: sourceIP(req.Source()), Codec: o.codec, TelephoneEvent: o.tePT,
		Say: func(text string) error { return s.say(dlg, session, text) }})
	var mv *Moved
	if errors.As(err, &mv) && len(mv.To) > 0 {
		s.moved(req, tx, session, mv)
		return
	}
	if err != nil {
		s.m.calls.WithLabelValues("conference_refused").Inc()
		code, reason := sip.StatusServiceUnavailable, "Service Unavailable"
		if !errors.Is(err, ErrConferenceFull) {
			code, reason = sip.StatusForbidden, "Forbidden"
		}
		res := sip.NewResponseFromRequest(req, code, reason, nil)
		res.AppendHeader(sip.NewHeader("Warning", fmt.Sprintf("399 convene %q", err.Error())))
		if code == sip.StatusServiceUnavailable { // for now: RFC 3261 21.5.4
			res.AppendHeader(sip.NewHeader("Retry-After", strconv.Itoa(int(max(s.o.RetryAfter/time.Second, 1)))))
		}
		s.respond(tx, res)
		return
	}
	s.conf.add(string(*req.CallID()), call)
	res := sip.NewResponseFromRequest(req, sip.StatusOK, "OK", answerSDP(o, local, uint64(s.o.Now().UnixNano())))
	if to := res.To(); to != nil && !to.Params.Has("tag") {
		to.Params.Add("tag", ourTag)
	}
	res.AppendHeader(sip.NewHeader("Contact", fmt.Sprintf("<sip:%s@%s>", session, hostPort(s.o.Advertise, s.port))))
	res.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	res.AppendHeader(sip.NewHeader("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS, INFO, MESSAGE"))
	s.m.calls.WithLabelValues("conference").Inc()
	s.respond(tx, res)
	if dlg != nil {
		close(dlg.ready) // requests inside the call may go now
	}
}

// confInDialog answers a request inside a conference call: BYE hangs the
// member up; INFO may carry a digit (application/dtmf-relay or
// application/dtmf); MESSAGE carries chat (confchat.go); a re-INVITE is
// refused, the call going on as it was.
func (s *Server) confInDialog(req *sip.Request, tx sip.ServerTransaction) bool {
	callID := string(*req.CallID())
	call, ok := s.conf.get(callID)
	if !ok {
		return false
	}
	switch req.Method {
	case sip.BYE:
		if call, ok := s.conf.take(callID); ok && call.Leave != nil {
			call.Leave()
		}
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil))
	case sip.ACK:
	case sip.INVITE:
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusNotAcceptableHere, "Not Acceptable Here", nil))
	case sip.INFO:
		ct := ""
		if h := req.ContentType(); h != nil {
			ct = strings.ToLower(h.Value())
		}
		if d, ok := infoDigit(ct, req.Body()); ok && call.Digit != nil {
			call.Digit(d)
		}
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil))
	case sip.MESSAGE:
		s.confMessage(req, tx, call)
	default:
		s.respond(tx, sip.NewResponseFromRequest(req, sip.StatusOK, "OK", nil))
	}
	return true
}

// infoDigit reads the digit of a SIP INFO body: "Signal=5" lines
// (application/dtmf-relay) or a bare digit (application/dtmf).
func infoDigit(contentType string, body []byte) (byte, bool) {
	v := strings.TrimSpace(string(body))
	switch {
	case strings.HasPrefix(contentType, "application/dtmf-relay"):
		v = ""
		for _, l := range strings.Split(string(body), "\n") {
			if k, val, ok := strings.Cut(l, "="); ok && strings.EqualFold(strings.TrimSpace(k), "signal") {
				v = strings.TrimSpace(val)
			}
		}
	case strings.HasPrefix(contentType, "application/dtmf"):
	default:
		return 0, false
	}
	if len(v) != 1 || !strings.Contains("0123456789*#ABCDabcd", v) {
		return 0, false
	}
	return strings.ToUpper(v)[0], true
}

// GuestPINs is the optional part of Conferences that lets guests dial in:
// the digests of a session's PIN for the username "guest" in the realm.
type GuestPINs interface {
	GuestCredentials(ctx context.Context, session string) (sipusers.Credentials, bool)
}

// guestUser is the digest username of a guest with a session's PIN.
const guestUser = "guest"

// confAccounts are the accounts, plus "guest" with the session's PIN.
type confAccounts struct {
	users   Users
	pins    GuestPINs
	session string
	realm   string
}

func (a confAccounts) Lookup(ctx context.Context, username string) (sipusers.Credentials, bool, error) {
	if username == guestUser && a.pins != nil {
		c, ok := a.pins.GuestCredentials(ctx, a.session)
		c.Username, c.Realm = guestUser, a.realm
		return c, ok, nil
	}
	return a.users.Lookup(ctx, username)
}
