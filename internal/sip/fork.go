package sip

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"
)

// target is one destination of a forwarded request.
type target struct {
	uri       sip.Uri // new Request-URI
	transport string  // "udp" or "tcp"
	addr      string  // host:port to send to
	user      string  // binding owner, to drop it if it does not answer
	contact   string
}

type forkOpts struct {
	recordRoute bool
	initial     bool // an out-of-dialog INVITE: a new call
	// relay: the call's media may go through the relay: an initial INVITE
	// whose caller authenticated (user), or a request inside a dialog the
	// proxy already relays (issue 11 item 2: no ports for strangers).
	relay bool
	user  string
}

type branchEvent struct {
	b   *branch
	res *sip.Response
	err error
}

type branch struct {
	t        target
	req      *sip.Request
	tx       sip.ClientTransaction
	done     bool
	provisnl bool
	final    *sip.Response
	failed   bool // timeout or transport error

	mu     sync.Mutex
	sdp2xx []byte // the rewritten SDP of the 2xx relayed upstream
	got2xx bool
}

// fork forwards req statefully to every target in parallel (RFC 3261 16.6),
// relays provisional responses, the first 2xx (cancelling the other
// branches) or, when every branch failed, the best final response (16.7).
// It returns when the upstream transaction has its final response.
func (s *Server) fork(req *sip.Request, tx sip.ServerTransaction, targets []target, fo forkOpts) {
	f := &forking{s: s, req: req, tx: tx, fo: fo, callID: string(*req.CallID())}
	f.fromTag, _ = req.From().Params.Get("tag")
	body, ok := f.offer()
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	events := make(chan branchEvent, 8*len(targets)+8)
	var wg sync.WaitGroup
	f.start(ctx, targets, body, events, &wg)
	defer func() {
		cancel()
		wg.Wait()
	}()
	if f.run(events) {
		f.finish()
	}
}

// forking is the state of one forked request while its branches run.
type forking struct {
	s       *Server
	req     *sip.Request
	tx      sip.ServerTransaction
	fo      forkOpts
	callID  string
	fromTag string
	// media: the request's SDP went through the relay.
	media    bool
	branches []*branch
	// answered: upstream has its final response (a 2xx, or sipgo's 487
	// after a CANCEL).
	answered bool
}

// offer passes the request's SDP through the relay when the call may use
// it, and returns the body to forward; false when the request was
// answered (503) instead.
func (f *forking) offer() ([]byte, bool) {
	s, req, fo := f.s, f.req, f.fo
	if fo.relay && fo.initial {
		s.calls.allowRelay(f.callID, fo.user)
	}
	f.media = s.o.Media != nil && fo.relay && isSDP(req)
	if !f.media {
		return req.Body(), true
	}
	src, _ := netip.ParseAddrPort(req.Source())
	out, err := s.o.Media.Offer(f.callID, f.fromTag, req.Body(), fo.user, src.Addr())
	if err != nil {
		s.log.Warn("sip: media offer", "call_id", f.callID, "err", err)
		res := sip.NewResponseFromRequest(req, sip.StatusServiceUnavailable, "Media Relay Unavailable", nil)
		res.AppendHeader(sip.NewHeader("Retry-After", strconv.Itoa(int(max(s.o.RetryAfter/time.Second, 1)))))
		s.respond(f.tx, res)
		if fo.initial {
			s.m.calls.WithLabelValues("failed").Inc()
			s.endCall(f.callID)
		}
		return nil, false
	}
	s.calls.media(f.callID)
	return out, true
}

// start sends one client transaction per target; each branch's responses
// come to events.
func (f *forking) start(ctx context.Context, targets []target, body []byte, events chan<- branchEvent, wg *sync.WaitGroup) {
	s, req := f.s, f.req
	for _, t := range targets {
		b := &branch{t: t, req: s.forwardRequest(req, t, f.fo.recordRoute, body)}
		f.branches = append(f.branches, b)
		ctx, err := s.client.TransactionRequest(ctx, b.req, sipgo.ClientRequestAddVia)
		if err != nil {
			s.log.Debug("sip: forward", "to", t.addr, "err", err)
			b.done, b.failed = true, true
			continue
		}
		b.tx = ctx
		if req.IsInvite() {
			// The UAS retransmits its 2xx until the ACK arrives; each
			// retransmission goes upstream too, so a lost 2xx or ACK is
			// recovered (RFC 3261 16.7 step 5, RFC 6026 8.4).
			ctx.OnRetransmission(func(res *sip.Response) {
				if res.IsSuccess() {
					s.relayRetransmission(req, b, res)
				}
			})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pump(b, events)
		}()
	}
}

// run handles the branches' responses, and a CANCEL from upstream, until
// every branch has its final response; false when the server is closing.
func (f *forking) run(events <-chan branchEvent) bool {
	s := f.s
	cancelCh := make(chan struct{})
	canceled := (<-chan struct{})(cancelCh)
	var cancelOnce sync.Once
	if f.req.IsInvite() {
		f.tx.OnCancel(func(*sip.Request) { cancelOnce.Do(func() { close(cancelCh) }) })
	}
	pending := 0
	for _, b := range f.branches {
		if !b.done {
			pending++
		}
	}
	for pending > 0 {
		select {
		case <-s.ctx.Done():
			return false
		case <-canceled:
			canceled = nil
			s.cancelBranches(f.branches, nil)
			if f.fo.initial {
				s.m.calls.WithLabelValues("canceled").Inc()
			}
			if f.media {
				s.endMedia(f.callID)
			}
			// sipgo answered the CANCEL and the INVITE (487); let the
			// branches finish so their 487s are absorbed.
			f.answered = true
		case ev := <-events:
			if f.onEvent(ev) {
				pending--
			}
		}
	}
	return true
}

// onEvent handles one branch event and reports whether it finished the
// branch.
func (f *forking) onEvent(ev branchEvent) bool {
	s, b := f.s, ev.b
	if ev.err != nil || ev.res == nil {
		if b.done {
			return false
		}
		b.done, b.failed = true, true
		s.branchFailed(b, ev.err)
		return true
	}
	res := ev.res
	if res.StatusCode == 100 {
		return false
	}
	if res.IsProvisional() {
		b.provisnl = true
		if !f.answered {
			s.relay(f.tx, f.req, res, f.media, f.callID, f.fromTag)
		}
		return false
	}
	if b.done {
		return false
	}
	b.done, b.final = true, res
	switch {
	case res.IsSuccess() && !f.answered:
		f.answered = true
		b.mu.Lock()
		b.got2xx = true
		b.mu.Unlock()
		s.relayBranch(f.tx, f.req, b, res, f.media, f.callID, f.fromTag)
		if f.fo.initial {
			s.m.calls.WithLabelValues("answered").Inc()
			s.calls.answered(f.callID, s.m)
		}
		s.cancelBranches(f.branches, b)
	case res.IsSuccess():
		// Another branch answered too: pass it on, the caller will BYE
		// it (16.7 step 5).
		s.relayStateless(f.req, res)
	case res.StatusCode >= 600 && !f.answered:
		s.cancelBranches(f.branches, b)
	}
	return true
}

// finish sends the best final response when no branch answered, and
// releases what the request held.
func (f *forking) finish() {
	s := f.s
	if f.answered {
		if f.req.Method == sip.BYE {
			s.endCall(f.callID)
		}
		return
	}
	if best := bestResponse(f.branches); best == nil {
		s.respond(f.tx, sip.NewResponseFromRequest(f.req, sip.StatusTemporarilyUnavailable, "Temporarily Unavailable", nil))
	} else {
		s.relay(f.tx, f.req, best, false, f.callID, f.fromTag)
	}
	if f.fo.initial {
		s.m.calls.WithLabelValues("failed").Inc()
		s.endCall(f.callID)
	}
	if f.req.Method == sip.BYE {
		s.endCall(f.callID)
	}
}

// pump passes a client transaction's responses to events until its final
// response or its end.
func pump(b *branch, events chan<- branchEvent) {
	for {
		select {
		case res, ok := <-b.tx.Responses():
			if !ok {
				events <- branchEvent{b: b, err: errors.New("sip: transaction closed")}
				return
			}
			events <- branchEvent{b: b, res: res}
			if !res.IsProvisional() {
				return
			}
		case <-b.tx.Done():
			err := b.tx.Err()
			if err == nil {
				err = errors.New("sip: transaction ended without a final response")
			}
			events <- branchEvent{b: b, err: err}
			return
		}
	}
}

// branchFailed handles a branch that timed out or could not be sent: the
// contact stopped answering, so its binding is dropped.
func (s *Server) branchFailed(b *branch, err error) {
	s.log.Debug("sip: branch failed", "to", b.t.addr, "err", err)
	if b.t.user != "" && (errors.Is(err, sip.ErrTransactionTimeout) || errors.Is(err, sip.ErrTransactionTransport)) {
		if s.loc.drop(b.t.user, b.t.contact) {
			s.m.dropped.Inc()
			s.m.registrations.Set(float64(s.loc.size()))
			s.log.Info("sip: dropped a contact that does not answer", "user", b.t.user, "contact", b.t.contact)
		}
	}
}

// forwardRequest copies req for target t (RFC 3261 16.6 steps 1-7); the
// Via is added by sipgo when it is sent.
func (s *Server) forwardRequest(req *sip.Request, t target, recordRoute bool, body []byte) *sip.Request {
	out := req.Clone()
	if req.CallID() != nil && req.Route() == nil {
		out.Recipient = *t.uri.Clone()
	}
	if mf := out.MaxForwards(); mf != nil {
		mf.Dec()
	} else {
		m := sip.MaxForwardsHeader(70)
		out.AppendHeader(&m)
	}
	if recordRoute {
		fromTag, _ := req.From().Params.Get("tag")
		rr := &sip.RecordRouteHeader{Address: sip.Uri{Scheme: "sip", Host: s.o.Advertise, Port: s.port,
			UriParams: sip.HeaderParams{{K: "transport", V: t.transport}, {K: "lr", V: ""},
				{K: rrParam, V: s.dialogToken(string(*req.CallID()), fromTag)}}}}
		out.PrependHeader(rr)
	}
	out.SetBody(body)
	s.route(out, t.transport, t.addr)
	return out
}

// route sets where out is sent. UDP requests leave from the listening
// socket, so a NATed client sees them come from the address it registered
// with (and sipgo opens no extra socket).
func (s *Server) route(out *sip.Request, transport, addr string) {
	out.SetTransport(toUpper(transport))
	out.SetDestination(addr)
	if transport == "udp" {
		out.Laddr = s.udpLaddr
	} else {
		out.Laddr = sip.Addr{}
	}
}

func toUpper(s string) string {
	switch s {
	case "udp":
		return "UDP"
	case "tcp":
		return "TCP"
	}
	return s
}

// cancelBranches sends CANCEL on every unfinished INVITE branch but keep.
func (s *Server) cancelBranches(bs []*branch, keep *branch) {
	for _, b := range bs {
		if b == keep || b.done || b.tx == nil || !b.req.IsInvite() {
			continue
		}
		c := cancelFor(b.req)
		go func() {
			ctx, cancel := context.WithTimeout(s.ctx, sip.Timer_F)
			defer cancel()
			ctx2, err := s.client.TransactionRequest(ctx, c, func(*sipgo.Client, *sip.Request) error { return nil })
			if err != nil {
				return
			}
			defer ctx2.Terminate()
			select {
			case <-ctx2.Responses():
			case <-ctx2.Done():
			case <-ctx.Done():
			}
		}()
	}
}

// cancelFor builds the CANCEL of a forwarded INVITE (RFC 3261 9.1): same
// Request-URI, top Via, Route, Call-ID, From, To and CSeq number.
func cancelFor(inv *sip.Request) *sip.Request {
	c := sip.NewRequest(sip.CANCEL, *inv.Recipient.Clone())
	c.SipVersion = inv.SipVersion
	if v := inv.Via(); v != nil {
		c.AppendHeader(v.Clone())
	}
	for _, r := range inv.GetHeaders("Route") {
		c.AppendHeader(sip.NewHeader("Route", r.Value()))
	}
	mf := sip.MaxForwardsHeader(70)
	c.AppendHeader(&mf)
	c.AppendHeader(sip.HeaderClone(inv.From()))
	c.AppendHeader(sip.HeaderClone(inv.To()))
	cid := *inv.CallID()
	c.AppendHeader(&cid)
	c.AppendHeader(&sip.CSeqHeader{SeqNo: inv.CSeq().SeqNo, MethodName: sip.CANCEL})
	c.SetBody(nil)
	c.SetTransport(inv.Transport())
	c.SetDestination(inv.Destination())
	c.Laddr = inv.Laddr
	return c
}

// bestResponse picks the final response to send upstream when no branch
// answered (RFC 3261 16.7 step 6): a 6xx, else the lowest class, 503 made
// 500; nil when every branch failed without a response.
func bestResponse(bs []*branch) *sip.Response {
	var best *sip.Response
	rank := func(r *sip.Response) int {
		switch {
		case r.StatusCode >= 600:
			return 0
		case r.StatusCode == 408:
			return 900 // a timeout only if nothing better
		}
		return r.StatusCode
	}
	for _, b := range bs {
		if b.final == nil {
			continue
		}
		if best == nil || rank(b.final) < rank(best) {
			best = b.final
		}
	}
	if best != nil && best.StatusCode == 503 {
		c := best.Clone()
		c.StatusCode, c.Reason = 500, "Server Internal Error"
		return c
	}
	return best
}
