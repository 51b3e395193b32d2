package sip

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"

	"github.com/emiago/sipgo/sip"
)

// Dialog tokens: the proxy routes an in-dialog request only when it belongs
// to a dialog it proxied (issue 11 item 1: no open relay).
//
// The Record-Route the proxy puts in an initial INVITE (or SUBSCRIBE,
// REFER) carries a parameter
//
//	Record-Route: <sip:proxy;transport=udp;lr;cv=TOKEN>
//	TOKEN = base64url(HMAC-SHA256(key, Call-ID 0x00 From-tag))[:16]
//
// Both ends copy the Record-Route into their route set (RFC 3261 12.1), so
// every request inside the dialog comes back with a Route naming the proxy
// and the token. The token binds the Call-ID and the caller's tag, which is
// the From-tag of the caller's requests and the To-tag of the callee's, so
// the check accepts either. Without a valid token the request is refused
// before anything is resolved or connected to.

// rrParam is the Record-Route URI parameter holding the dialog token.
const rrParam = "cv"

// dialogToken is the token of the dialog (callID, tag).
func (s *Server) dialogToken(callID, tag string) string {
	m := hmac.New(sha256.New, s.dialogKey)
	m.Write([]byte(callID))
	m.Write([]byte{0})
	m.Write([]byte(tag))
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(m.Sum(sum[:0])[:12])
}

// ourDialog reports whether token (from the Route that named us) was made
// by this proxy for req's Call-ID and one of its tags.
func (s *Server) ourDialog(req *sip.Request, token string) bool {
	if token == "" || req.CallID() == nil {
		return false
	}
	callID := string(*req.CallID())
	for _, tag := range dialogTags(req) {
		if tag != "" && subtle.ConstantTimeCompare([]byte(s.dialogToken(callID, tag)), []byte(token)) == 1 {
			return true
		}
	}
	return false
}

func dialogTags(req *sip.Request) [2]string {
	var out [2]string
	if f := req.From(); f != nil {
		out[0], _ = f.Params.Get("tag")
	}
	if t := req.To(); t != nil {
		out[1], _ = t.Params.Get("tag")
	}
	return out
}

// denyRoute counts a refused in-dialog request and builds its answer
// (nil for an ACK, which is never answered).
func (s *Server) denyRoute(req *sip.Request) *sip.Response {
	s.m.denied.WithLabelValues("dialog").Inc()
	if req.IsAck() {
		return nil
	}
	return sip.NewResponseFromRequest(req, sip.StatusForbidden, "Forbidden (not a dialog of this proxy)", nil)
}
