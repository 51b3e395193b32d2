package sip

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"hash"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/emiago/sipgo/sip"

	"github.com/convene/convene/internal/sipusers"
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
// per algorithm in order of preference (SHA-256, then MD5), sharing one
// nonce. header is WWW-Authenticate (401) or Proxy-Authenticate (407).
func (s *Server) challenge(res *sip.Response, header string, stale bool) {
	nonce := s.nonces.issue(s.o.Now())
	var tail string
	if stale {
		tail = `, stale=true`
	}
	for _, alg := range s.algorithms {
		res.AppendHeader(sip.NewHeader(header, `Digest realm="`+s.o.Domain+`", nonce="`+nonce+
			`", algorithm=`+alg+`, qop="auth"`+tail))
	}
	s.m.challenges.Inc()
}

// authenticate checks the credentials in header (Authorization or
// Proxy-Authorization) of req. A request without credentials for our realm
// gets a plain challenge.
func (s *Server) authenticate(ctx context.Context, req *sip.Request, header string) authResult {
	var cred credentials
	found := false
	for _, h := range req.GetHeaders(header) {
		c, err := parseCredentials(h.Value())
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
	return s.checkCredentials(ctx, string(req.Method), &cred, rtxKey(req))
}

func (s *Server) checkCredentials(ctx context.Context, method string, c *credentials, rtx uint32) authResult {
	fail := func(reason string) authResult {
		s.m.authFailures.WithLabelValues(reason).Inc()
		return authResult{fail: reason}
	}
	var newHash func() hash.Hash
	switch strings.ToUpper(c.Algorithm) {
	case "", sipusers.MD5:
		newHash = md5.New
		c.Algorithm = sipusers.MD5
	case sipusers.SHA256:
		newHash = sha256.New
		c.Algorithm = sipusers.SHA256
	default:
		return fail("bad_header")
	}
	qop := strings.ToLower(c.QOP)
	if qop != "" && qop != "auth" {
		return fail("bad_header")
	}
	if c.Response == "" || c.Nonce == "" || c.Username == "" || (qop == "auth" && (c.ncRaw == "" || c.NC == 0)) {
		return fail("bad_header")
	}
	cr, found, err := s.o.Users.Lookup(ctx, c.Username)
	if err != nil {
		s.log.Warn("sip: user lookup", "user", c.Username, "err", err)
		return fail("lookup_error")
	}
	if !found || cr.Realm != s.o.Domain {
		return fail("unknown_user")
	}
	ha1 := cr.HA1(c.Algorithm)
	if ha1 == "" {
		return fail("unknown_user")
	}
	ha2 := hexHash(newHash(), method, ":", c.URI)
	var want string
	nc := c.NC
	if qop == "auth" {
		want = hexHash(newHash(), ha1, ":", c.Nonce, ":", c.ncRaw, ":", c.Cnonce, ":", qop, ":", ha2)
	} else {
		// RFC 2069 compatibility: no nonce-count, so the nonce is good once.
		want = hexHash(newHash(), ha1, ":", c.Nonce, ":", ha2)
		nc = 1
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(strings.ToLower(c.Response))) != 1 {
		return fail("bad_response")
	}
	switch s.nonces.use(c.Nonce, nc, rtx, s.o.Now()) {
	case nonceOK:
		return authResult{user: c.Username, ok: true}
	case nonceStale:
		s.m.authFailures.WithLabelValues("stale").Inc()
		return authResult{stale: true, fail: "stale"}
	}
	return fail("bad_nonce")
}

func hexHash(h hash.Hash, parts ...string) string {
	for _, p := range parts {
		h.Write([]byte(p))
	}
	var buf [sha256.Size]byte
	return hex.EncodeToString(h.Sum(buf[:0]))
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
