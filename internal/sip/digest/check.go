package digest

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"hash"
	"strings"
	"time"

	"github.com/convene/convene/internal/sipusers"
)

// Accounts looks up an account's digests.
type Accounts interface {
	Lookup(ctx context.Context, username string) (c sipusers.Credentials, found bool, err error)
}

// Checker checks credentials for one realm.
type Checker struct {
	Realm    string
	Nonces   *Nonces
	Accounts Accounts
}

// Result is the outcome of Check.
type Result struct {
	User  string // the authenticated account when OK
	OK    bool
	Stale bool // challenge again with stale=true
	// Fail names why it failed, for a metric: bad_header, lookup_error,
	// unknown_user, bad_response, bad_nonce, stale.
	Fail string
	// Err is a lookup error (Fail lookup_error).
	Err error
}

// Challenge returns the header values of one challenge per algorithm, in
// order of preference, sharing one fresh nonce (RFC 8760 section 2.4).
func (k *Checker) Challenge(algorithms []string, stale bool, now time.Time) []string {
	nonce := k.Nonces.Issue(now)
	var tail string
	if stale {
		tail = `, stale=true`
	}
	out := make([]string, 0, len(algorithms))
	for _, alg := range algorithms {
		out = append(out, `Digest realm="`+k.Realm+`", nonce="`+nonce+`", algorithm=`+alg+`, qop="auth"`+tail)
	}
	return out
}

// Check verifies c for method (RFC 7616 section 3.4.1) and records its
// nonce-count; rtx identifies the request, so that its retransmission is
// accepted again.
func (k *Checker) Check(ctx context.Context, method string, c *Credentials, rtx uint32, now time.Time) Result {
	return k.CheckWith(ctx, k.Accounts, method, c, rtx, now)
}

// CheckWith is Check against other accounts (a session's guest PIN).
func (k *Checker) CheckWith(ctx context.Context, accounts Accounts, method string, c *Credentials, rtx uint32, now time.Time) Result {
	var newHash func() hash.Hash
	switch strings.ToUpper(c.Algorithm) {
	case "", sipusers.MD5:
		newHash = md5.New
		c.Algorithm = sipusers.MD5
	case sipusers.SHA256:
		newHash = sha256.New
		c.Algorithm = sipusers.SHA256
	default:
		return Result{Fail: "bad_header"}
	}
	qop := strings.ToLower(c.QOP)
	if qop != "" && qop != "auth" {
		return Result{Fail: "bad_header"}
	}
	if c.Response == "" || c.Nonce == "" || c.Username == "" || (qop == "auth" && (c.NCRaw == "" || c.NC == 0)) {
		return Result{Fail: "bad_header"}
	}
	cr, found, err := accounts.Lookup(ctx, c.Username)
	if err != nil {
		return Result{Fail: "lookup_error", Err: err}
	}
	if !found || cr.Realm != k.Realm {
		return Result{Fail: "unknown_user"}
	}
	ha1 := cr.HA1(c.Algorithm)
	if ha1 == "" {
		return Result{Fail: "unknown_user"}
	}
	ha2 := hexHash(newHash(), method, ":", c.URI)
	var want string
	nc := c.NC
	if qop == "auth" {
		want = hexHash(newHash(), ha1, ":", c.Nonce, ":", c.NCRaw, ":", c.Cnonce, ":", qop, ":", ha2)
	} else {
		// RFC 2069 compatibility: no nonce-count, so the nonce is good once.
		want = hexHash(newHash(), ha1, ":", c.Nonce, ":", ha2)
		nc = 1
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(strings.ToLower(c.Response))) != 1 {
		return Result{Fail: "bad_response"}
	}
	switch k.Nonces.Use(c.Nonce, nc, rtx, now) {
	case NonceOK:
		return Result{User: c.Username, OK: true}
	case NonceStale:
		return Result{Stale: true, Fail: "stale"}
	}
	return Result{Fail: "bad_nonce"}
}

func hexHash(h hash.Hash, parts ...string) string {
	for _, p := range parts {
		h.Write([]byte(p))
	}
	var buf [sha256.Size]byte
	return hex.EncodeToString(h.Sum(buf[:0]))
}
