package sip

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"
)

// Dialler is the optional part of Conferences that lets the node call a
// phone into a session: the node's media address for the offer.
type Dialler interface {
	MediaAddr() netip.AddrPort
}

// ErrNotRegistered is a call to an account with no registered phone.
var ErrNotRegistered = errors.New("sip: the account has no registered phone")

// ringFor is how long an outbound call rings before it is given up, and
// maxRinging how many may ring at once on the node.
const (
	ringFor    = 30 * time.Second
	maxRinging = 50
)

// ErrBusy is a call refused because the node rings as many as it may.
var ErrBusy = errors.New("sip: the node is ringing as many phones as it may")

// offerSDP is the node's offer: PCMU, PCMA and telephone events at local.
func offerSDP(local netip.AddrPort, id uint64) []byte {
	ip := "IP4"
	if local.Addr().Is6() {
		ip = "IP6"
	}
	return []byte(fmt.Sprintf("v=0\r\no=convene %d 1 IN %s %s\r\ns=convene\r\nc=IN %s %s\r\nt=0 0\r\n"+
		"m=audio %d RTP/AVP 0 8 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\n"+
		"a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-16\r\na=ptime:20\r\na=sendrecv\r\n",
		id, ip, local.Addr(), ip, local.Addr(), local.Port()))
}

// Call makes the node call user's registered phone into session: it
// rings for up to 30 s on its own goroutine, and an answer joins the phone
// as a member like one that dialled in. It returns the call's Call-ID.
func (s *Server) Call(ctx context.Context, session, user string) (string, error) {
	d, ok := s.o.Conferences.(Dialler)
	if !ok || s.o.Conferences == nil {
		return "", errors.New("sip: this node does not call phones into sessions")
	}
	if !validUser(user) {
		return "", fmt.Errorf("%w: %q is not an account name", ErrNotRegistered, user)
	}
	if !s.o.Conferences.IsConference(ctx, session) {
		return "", fmt.Errorf("sip: %q is not an active session", session)
	}
	bs := s.loc.lookup(user, s.o.Now())
	if len(bs) == 0 {
		return "", fmt.Errorf("%w: %q", ErrNotRegistered, user)
	}
	if s.ringing.Add(1) > maxRinging {
		s.ringing.Add(-1)
		return "", ErrBusy
	}
	b := bs[0]
	tp, addr := b.dest()
	callID := sip.GenerateTagN(24)
	req := sip.NewRequest(sip.INVITE, *b.uri.Clone())
	from := &sip.FromHeader{DisplayName: "Convene", Address: sip.Uri{Scheme: "sip", User: session, Host: s.o.Domain}}
	from.Params.Add("tag", sip.GenerateTagN(16))
	req.AppendHeader(from)
	req.AppendHeader(&sip.ToHeader{Address: sip.Uri{Scheme: "sip", User: user, Host: s.o.Domain}})
	cid := sip.CallIDHeader(callID)
	req.AppendHeader(&cid)
	req.AppendHeader(&sip.CSeqHeader{SeqNo: 1, MethodName: sip.INVITE})
	req.AppendHeader(sip.NewHeader("Contact", fmt.Sprintf("<sip:%s@%s>", session, hostPort(s.o.Advertise, s.port))))
	req.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
	req.SetBody(offerSDP(d.MediaAddr(), uint64(s.o.Now().UnixNano())))
	s.route(req, tp, addr)
	s.m.calls.WithLabelValues("outbound").Inc()
	go s.ring(req, session, user, tp, addr)
	return callID, nil
}

// ring waits for the phone's answer, acknowledges it and joins the phone.
func (s *Server) ring(req *sip.Request, session, user, tp, addr string) {
	ctx, cancel := context.WithTimeout(s.ctx, ringFor)
	defer cancel()
	res, err := s.client.Do(ctx, req)
	s.ringing.Add(-1)
	if err != nil || res.StatusCode != sip.StatusOK {
		code := 0
		if res != nil {
			code = res.StatusCode
		}
		s.m.calls.WithLabelValues("outbound_unanswered").Inc()
		s.log.Info("sip: outbound call not answered", "session", session, "user", user, "status", code, "err", err)
		return
	}
	s.inDialogRequest(sip.ACK, req, res, 1, tp, addr)
	o, err := parseOffer(res.Body())
	if err != nil {
		s.log.Info("sip: outbound call's answer", "session", session, "user", user, "err", err)
		s.inDialogRequest(sip.BYE, req, res, 2, tp, addr)
		return
	}
	_, call, err := s.o.Conferences.Join(s.ctx, Caller{Session: session, User: user, Display: user,
		Media: o.remote, Signal: sourceIP(addr), Codec: o.codec, TelephoneEvent: o.tePT})
	if err != nil {
		s.log.Info("sip: outbound call into the session", "session", session, "user", user, "err", err)
		s.inDialogRequest(sip.BYE, req, res, 2, tp, addr)
		return
	}
	s.conf.add(string(*req.CallID()), call)
	s.m.calls.WithLabelValues("conference").Inc()
}

// inDialogRequest sends ACK or BYE in the dialog of an answered INVITE
// the node sent (to the phone's Contact).
func (s *Server) inDialogRequest(method sip.RequestMethod, inv *sip.Request, res *sip.Response, cseq uint32, tp, addr string) {
	target := inv.Recipient
	if c := res.Contact(); c != nil {
		target = c.Address
	}
	out := sip.NewRequest(method, *target.Clone())
	out.AppendHeader(sip.HeaderClone(inv.From()))
	out.AppendHeader(sip.HeaderClone(res.To()))
	out.AppendHeader(sip.HeaderClone(inv.CallID()))
	out.AppendHeader(&sip.CSeqHeader{SeqNo: cseq, MethodName: method})
	mf := sip.MaxForwardsHeader(70)
	out.AppendHeader(&mf)
	s.route(out, tp, addr)
	if method == sip.ACK {
		_ = s.client.WriteRequest(out)
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	_, _ = s.client.Do(ctx, out)
}

// validUser is an account name a call may name (no URI syntax in it).
func validUser(u string) bool {
	return u != "" && len(u) <= 64 && !strings.ContainsAny(u, "@:;<> \t\r\n") && strconv.QuoteToASCII(u) == `"`+u+`"`
}
