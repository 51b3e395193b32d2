package auth

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrStamp is a stamp that is malformed, forged, for another scope or
// expired.
var ErrStamp = errors.New("the signed path is not valid (or has expired)")

// maxStamp bounds what CheckStamp looks at; maxStampKey bounds a key.
const (
	maxStamp    = 128
	maxStampKey = 40
)

// Stamp signs scope until exp: "<exp unix seconds>-<HMAC, 16 bytes,
// base64url>", short enough for a URL path segment. HLS viewers get one
// in place of their token, so players that cannot send headers fetch
// every segment under a signed, expiring path prefix.
//
// A non-empty key (the id of the join or view token the stamp was made
// for) is carried and signed too: "<exp>.<key>.<HMAC>", so whoever serves
// the path can ask whether that token was revoked since. A key is 1 to
// 40 characters of [A-Za-z0-9_]; any other key is left out. Keyed and
// keyless stamps sign distinct messages, so neither passes for the other.
func (s *Signer) Stamp(scope, key string, exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	if key != "" && validStampKey(key) {
		return e + "." + key + "." + base64.RawURLEncoding.EncodeToString(s.mac("stampk|" + scope + "|" + e + "|" + key)[:16])
	}
	return e + "-" + base64.RawURLEncoding.EncodeToString(s.mac("stamp|" + scope + "|" + e)[:16])
}

// CheckStamp reports whether stamp signs scope and has not expired, and
// returns the key it carries ("" for none).
func (s *Signer) CheckStamp(scope, stamp string) (key string, err error) {
	if len(stamp) > maxStamp {
		return "", ErrStamp
	}
	var e, sig64, msg string
	if e0, rest, ok := strings.Cut(stamp, "."); ok {
		k, sig, ok := strings.Cut(rest, ".")
		if !ok || !validStampKey(k) {
			return "", ErrStamp
		}
		e, key, sig64, msg = e0, k, sig, "stampk|"+scope+"|"+e0+"|"+k
	} else {
		e0, sig, ok := strings.Cut(stamp, "-")
		if !ok {
			return "", ErrStamp
		}
		e, sig64, msg = e0, sig, "stamp|"+scope+"|"+e0
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || strconv.FormatInt(exp, 10) != e {
		return "", ErrStamp
	}
	// The signature is compared as text, so only the one encoding the
	// signer makes passes (no stray bits or line breaks).
	if !hmac.Equal([]byte(sig64), []byte(base64.RawURLEncoding.EncodeToString(s.mac(msg)[:16]))) {
		return "", ErrStamp
	}
	if s.now().Unix() >= exp {
		return "", ErrStamp
	}
	return key, nil
}

func validStampKey(k string) bool {
	if k == "" || len(k) > maxStampKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
