// Package media holds the values every media path shares, and nothing
// else: the pooled, reference-counted Packet and its Kind (audio is routed
// before video), the RTP/RTCP header checks (Classify), an endpoint's
// Direction and the drop reasons links count. It imports no other package
// of Convene, so the broker, the links, the relay, the socket layer and the
// load generator can all use it without importing each other.
package media
