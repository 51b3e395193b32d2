package sip

import (
	"bytes"

	"github.com/emiago/sipgo/sip"
)

// maxAmplification bounds what the node sends over UDP in answer to a
// request it has not authenticated: at most this many times the request's
// size (issue 11 item 4). A source address over UDP can be forged, so an
// answer much larger than its request would make the node an amplifier
// aimed at the forged address.
const maxAmplification = 3

// bounded returns res, or, when res written out would be larger than
// maxAmplification times reqLen bytes, a minimal answer with the same
// status: the request's Via, From, To, Call-ID and CSeq (never larger than
// the request) and at most one challenge header.
func bounded(req *sip.Request, res *sip.Response, reqLen int) *sip.Response {
	var buf bytes.Buffer
	res.StringWrite(&buf)
	if buf.Len() <= maxAmplification*reqLen {
		return res
	}
	return smaller(req, res, reqLen)
}

// smaller is bounded's minimal answer.
func smaller(req *sip.Request, res *sip.Response, reqLen int) *sip.Response {
	var buf bytes.Buffer
	small := sip.NewResponseFromRequest(req, res.StatusCode, res.Reason, nil)
	for _, name := range []string{"WWW-Authenticate", "Proxy-Authenticate", "Retry-After"} {
		if h := res.GetHeader(name); h != nil {
			small.AppendHeader(sip.NewHeader(name, h.Value()))
		}
	}
	small.StringWrite(&buf)
	if buf.Len() > maxAmplification*reqLen {
		return sip.NewResponseFromRequest(req, res.StatusCode, res.Reason, nil)
	}
	return small
}

// requestLen is the size of req as it is written on the wire.
func requestLen(req *sip.Request) int {
	var buf bytes.Buffer
	req.StringWrite(&buf)
	return buf.Len()
}
