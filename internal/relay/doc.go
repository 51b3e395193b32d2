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
// Endpoints behind NAT announce a private address in their SDP; the relay
// latches onto the source address of the first packet a side sends and sends
// the other direction there from then on (packets from other sources are
// dropped and counted until a new offer or answer changes that side's SDP).
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
