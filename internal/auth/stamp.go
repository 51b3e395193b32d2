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

// Stamp signs scope until exp: "<exp unix seconds>-<HMAC, 16 bytes,
// base64url>", short enough for a URL path segment. HLS viewers get one
// in place of their token, so players that cannot send headers fetch
// every segment under a signed, expiring path prefix.
func (s *Signer) Stamp(scope string, exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return e + "-" + base64.RawURLEncoding.EncodeToString(s.mac("stamp|" + scope + "|" + e)[:16])
}

// CheckStamp reports whether stamp signs scope and has not expired.
func (s *Signer) CheckStamp(scope, stamp string) error {
	e, sig64, ok := strings.Cut(stamp, "-")
	if !ok || len(stamp) > 64 {
		return ErrStamp
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil {
		return ErrStamp
	}
	sig, err := base64.RawURLEncoding.DecodeString(sig64)
	if err != nil || !hmac.Equal(sig, s.mac("stamp|" + scope + "|" + e)[:16]) {
		return ErrStamp
	}
	if s.now().Unix() >= exp {
		return ErrStamp
	}
	return nil
}
