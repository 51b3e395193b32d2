// Package relay is Convene's RTP relay for proxied SIP calls: it rewrites the
// SDP of both call legs so that media flows through sockets of this node, and
// forwards the packets between the legs.
//
// A call (SIP Call-ID) has one stream per SDP m= line; a stream has two sides,
// the offerer's and the answerer's. Each side owns an RTP and an RTCP socket
// (an even port and port+1 from Options.PortMin..PortMax) that its endpoint
// sends to; a packet read from side X's socket is sent from the other side's
// socket to the other side's endpoint, so each endpoint sees one address for
// the far end in both directions (symmetric RTP, RFC 4961).
//
// Ports are drawn at random from the range, and a released pair is held
// back for a while (ports.go), so that a third party cannot guess a call's
// ports from another call's.
//
// The relay sends a side's media to the address it latched onto: the
// source of that party's packets (symmetric RTP). It latches only onto a
// source whose IP is the one in the party's SDP or its signalling source;
// a party behind NAT, whose SDP gives a private address, is learnt from its
// first packet within a short window after each offer or answer, and never
// replaced by another IP after that (latch.go). Other sources are dropped
// and counted.
//
// Offers are charged to the call's authenticated user and signalling source
// IP: streams per call, per user and per source are capped (limits.go), so
// that nobody can empty the port range.
//
// The forwarding path is a few worker goroutines, each running epoll over the
// sockets of the calls given to it, reading with recvmmsg and sending each
// batch with sendmmsg from the same buffers: no allocation and no copy per
// packet. Control (Offer, Answer, Delete) runs on the caller's goroutine under
// one mutex; the worker that owns a socket is the only one that reads, writes
// and closes it, so no descriptor is closed under another thread's feet.
//
// Package relay/ng speaks rtpengine's ng control protocol to a Relay, so the
// same driver benchmarks Convene and rtpengine.
package relay
