// Package digest is SIP digest authentication (RFC 7616, RFC 8760, RFC
// 3261 section 22): parsing the Authorization header, stateless nonces with
// nonce-count replay protection, and checking a response against an
// account's HA1. It knows nothing of transports or metrics; package sip
// calls it and counts the outcomes.
package digest
