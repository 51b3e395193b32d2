// Package auth is access to a node: operator API keys, and signed tokens
// that admit people to one session with one role until an expiry.
//
// A token is
//
//	cv1.<base64url(JSON claims)>.<base64url(HMAC-SHA256(secret, "cv1."+claims))>
//
// with claims {"s": session, "r": role, "e": expiry (unix seconds), "m":
// member, "n": nonce}. A join token has no member: the API issues it, and
// whoever holds it may join the session once per use with that role. Joining
// returns a member token (the same format with "m" set) that identifies the
// member in every later request: floor primitives, its media links, the
// event stream. Every gateway (RTP, WebRTC, SIP) admits people this way.
package auth
