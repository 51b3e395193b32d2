package sip

import (
	"net/netip"

	"github.com/emiago/sipgo/sip"
)

// Responses on their way to the caller: our Via removed, SDP rewritten by
// the relay when the call has one, 2xx retransmissions passed on with the
// same SDP.

// relay sends a downstream response upstream with our Via removed,
// rewriting its SDP through the media relay when the call has one.
func (s *Server) relay(tx sip.ServerTransaction, req *sip.Request, res *sip.Response, media bool, callID, fromTag string) {
	s.respond(tx, s.upstream(req, res, media, callID, fromTag))
}

// upstream is res as it goes to the caller: our Via removed, SDP rewritten
// through the media relay when the call has one. For an INVITE that came
// without SDP (a late offer), the 2xx's SDP is the offer: the relay takes it
// from the responder, and the ACK brings the answer (lateAnswer).
func (s *Server) upstream(req *sip.Request, res *sip.Response, media bool, callID, fromTag string) *sip.Response {
	out := res.Clone()
	out.RemoveHeader("Via")
	out.SetDestination("")
	out.SetTransport(req.Transport())
	if s.o.Media != nil && req.IsInvite() && !isSDP(req) && res.IsSuccess() && isSDPResponse(res) {
		user, ok := s.calls.relayUser(callID)
		if !ok {
			return out
		}
		toTag, _ := res.To().Params.Get("tag")
		sdp, err := s.o.Media.Offer(callID, toTag, res.Body(), user, netip.Addr{})
		if err != nil {
			s.log.Warn("sip: media offer in 2xx", "call_id", callID, "err", err)
			return out
		}
		s.calls.lateOffer(callID)
		out.SetBody(sdp)
		return out
	}
	if media && isSDPResponse(res) && (res.IsSuccess() || res.IsProvisional()) {
		toTag, _ := res.To().Params.Get("tag")
		src, _ := netip.ParseAddrPort(res.Source())
		sdp, err := s.o.Media.Answer(callID, fromTag, toTag, res.Body(), src.Addr())
		if err != nil {
			s.log.Warn("sip: media answer", "call_id", callID, "err", err)
		} else {
			out.SetBody(sdp)
		}
	}
	return out
}

// lateAnswer rewrites the SDP answer an ACK carries for a late offer; the
// offerer is the ACK's To-tag party (it sent the 2xx), the answerer its
// From-tag party.
func (s *Server) lateAnswer(req *sip.Request) {
	if s.o.Media == nil || !req.IsAck() || !isSDP(req) || req.CallID() == nil {
		return
	}
	callID := string(*req.CallID())
	if !s.calls.takeAnswer(callID) {
		return
	}
	fromTag, _ := req.From().Params.Get("tag")
	toTag, _ := req.To().Params.Get("tag")
	src, _ := netip.ParseAddrPort(req.Source())
	sdp, err := s.o.Media.Answer(callID, toTag, fromTag, req.Body(), src.Addr())
	if err != nil {
		s.log.Warn("sip: media answer in ACK", "call_id", callID, "err", err)
		return
	}
	req.SetBody(sdp)
}

// relayBranch relays a branch's 2xx and keeps its rewritten SDP for the
// retransmissions.
func (s *Server) relayBranch(tx sip.ServerTransaction, req *sip.Request, b *branch, res *sip.Response, media bool, callID, fromTag string) {
	out := s.upstream(req, res, media, callID, fromTag)
	b.mu.Lock()
	b.sdp2xx = out.Body()
	b.mu.Unlock()
	s.respond(tx, out)
}

// relayRetransmission passes a retransmitted 2xx upstream statelessly,
// with the SDP the first one was given.
func (s *Server) relayRetransmission(req *sip.Request, b *branch, res *sip.Response) {
	b.mu.Lock()
	sdp, ok := b.sdp2xx, b.got2xx
	b.mu.Unlock()
	if !ok {
		return // not the answer we relayed (another branch won)
	}
	out := res.Clone()
	out.RemoveHeader("Via")
	out.SetDestination("")
	out.SetTransport(req.Transport())
	if sdp != nil {
		out.SetBody(sdp)
	}
	s.writeResponse(out)
}

// relayStateless sends a response upstream outside the transaction.
func (s *Server) relayStateless(req *sip.Request, res *sip.Response) {
	out := res.Clone()
	out.RemoveHeader("Via")
	out.SetDestination("")
	out.SetTransport(req.Transport())
	s.writeResponse(out)
}
