// Package sipbench is `convene-bench sip`: Convene's SIP registrar and
// proxy measured beside Kamailio (Debian's kamailio package, configured by
// bench/kamailio/kamailio.cfg to do the same work) in the same run, both
// driven by SIPp on this machine.
//
// Three workloads, each searched for its highest clean rate (every SIPp
// call succeeded, no retransmission):
//
//   - reg_fresh: REGISTER -> 401 -> REGISTER with digest -> 200, a fresh
//     challenge every time; the rate is registrations per second.
//   - reg_reuse: one challenge, then 20 REGISTERs reusing the nonce with a
//     growing nonce-count; the rate is authenticated REGISTERs per second.
//   - call: INVITE-180-200-ACK-BYE-200 through the record-routing proxy to
//     a registered user; the rate is call setups per second.
//
// SIPp's response times (average and spread of each round trip) are
// reported for the highest clean point. The results go to
// <out>/<date>-sip.md and .json, and a CPU profile of Convene at its limit
// to <out>/<date>-sip-<workload>.pprof.
package sipbench
