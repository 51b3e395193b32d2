// Package sip is Convene's SIP signalling: a registrar with digest
// authentication and a record-routing stateful proxy between registered
// users, built on github.com/emiago/sipgo for parsing, transports and
// transactions.
//
// A REGISTER (RFC 3261 section 10.3) is handled statelessly, the way
// Kamailio's default registrar is: on UDP it is taken off the read loop by
// a transport read filter and answered by a pool of workers; on TCP it comes
// through sipgo's transaction layer. It is challenged with SHA-256 and MD5
// (RFC 7616, RFC 8760, qop=auth). A client may reuse a nonce with a growing
// nonce-count and is not challenged again (the seed's "Registration-II"),
// checked against the nonce's own state, never against the source address;
// an expired or evicted nonce is answered with stale=true. Bindings are kept
// in memory and written behind to the catalog, so they survive a restart.
//
// An INVITE to sip:user@domain is forked to every contact of the user with
// a Record-Route, so in-dialog requests (ACK, BYE, re-INVITE) come back
// through the proxy; CANCEL is propagated, 404/480 are answered for unknown
// and unregistered users, and the best final response is passed back. SDP is
// rewritten through a Media relay (Offer on the INVITE, Answer on the
// 18x/2xx, Delete when the call ends).
//
// NAT (RFC 3581, RFC 5626): the top Via gets received/rport; a client whose
// Via or Contact differs from its packet source is NATed, gets a short
// Expires and is reached at the address its REGISTER came from; TCP CRLF
// keep-alives are answered by sipgo's transport; contacts are probed with
// OPTIONS and dropped when they stop answering.
//
// Metrics are named convene_sip_* (see metrics.go).
package sip
