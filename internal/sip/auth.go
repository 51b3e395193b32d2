package sip

import (
	"context"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"

	"github.com/convene/convene/internal/sip/digest"
)

// authResult is the outcome of a digest check.
type authResult struct {
	user  string // authenticated username when ok
	ok    bool
	stale bool   // challenge again with stale=true
	fail  string // metric reason when neither ok nor a plain challenge
	// badURI: the credentials' uri is not the Request-URI (RFC 7616
	// section 3.4.6: 400, so they cannot be replayed on another request).
	badURI bool
}

// challenge adds the digest challenges of RFC 8760 section 2.4 to res, one
// per algorithm in order of preference, sharing one nonce. header is
// WWW-Authenticate (401) or Proxy-Authenticate (407).
func (s *Server) challenge(res *sip.Response, header string, stale bool) {
	for _, v := range s.digest.Challenge(s.algorithms, stale, s.o.Now()) {
		res.AppendHeader(sip.NewHeader(header, v))
	}
	s.m.challenges.Inc()
}

// authenticate checks the credentials in header (Authorization or
// Proxy-Authorization) of req. A request without credentials for our realm
// gets a plain challenge.
func (s *Server) authenticate(ctx context.Context, req *sip.Request, header string) authResult {
	return s.authenticateWith(ctx, s.o.Users, req, header)
}

// authenticateWith checks req's credentials against accounts.
func (s *Server) authenticateWith(ctx context.Context, accounts digest.Accounts, req *sip.Request, header string) authResult {
	var cred digest.Credentials
	found := false
	for _, h := range req.GetHeaders(header) {
		c, err := digest.ParseCredentials(h.Value())
		if err != nil {
			s.m.authFailures.WithLabelValues("bad_header").Inc()
			continue
		}
		if c.Realm == s.o.Domain {
			cred, found = c, true
			break
		}
	}
	if !found {
		return authResult{}
	}
	if !sameURI(cred.URI, &req.Recipient) {
		s.m.authFailures.WithLabelValues("uri_mismatch").Inc()
		return authResult{fail: "uri_mismatch", badURI: true}
	}
	r := s.digest.CheckWith(ctx, accounts, string(req.Method), &cred, rtxKey(req), s.o.Now())
	if r.Err != nil {
		s.log.Warn("sip: user lookup", "user", cred.Username, "err", r.Err)
	}
	if r.Fail != "" {
		s.m.authFailures.WithLabelValues(r.Fail).Inc()
	}
	return authResult{user: r.User, ok: r.OK, stale: r.Stale, fail: r.Fail}
}

// rtxKey identifies a request across its retransmissions: the top Via
// branch and the CSeq.
func rtxKey(req *sip.Request) uint32 {
	h := fnv.New32a()
	if v := req.Via(); v != nil {
		b, _ := v.Params.Get("branch")
		h.Write([]byte(b))
	}
	if c := req.CSeq(); c != nil {
		h.Write([]byte(strconv.FormatUint(uint64(c.SeqNo), 10)))
	}
	return h.Sum32()
}

// sameURI reports whether the digest uri names the Request-URI: the same
// scheme, user, host and port (an absent port being 5060), as RFC 3261
// section 19.1.4 compares them.
func sameURI(digestURI string, req *sip.Uri) bool {
	var u sip.Uri
	if err := sip.ParseUri(digestURI, &u); err != nil {
		return false
	}
	port := func(p int) int {
		if p == 0 {
			return 5060
		}
		return p
	}
	return strings.EqualFold(u.Scheme, req.Scheme) && u.User == req.User &&
		strings.EqualFold(strings.Trim(u.Host, "[]"), strings.Trim(req.Host, "[]")) && port(u.Port) == port(req.Port)
}
