// Package broker is Convene's media broker: the publish/subscribe core that the
// seeds' NaradaBrokering played.
//
// A Room holds the media of one session. Every endpoint attached to a room is
// a Member (a plain RTP link, a multicast bridge, later a WebRTC peer or a SIP
// leg). A member that sends media owns one Track per media kind; every other
// member that receives that kind subscribes to it. A member never subscribes
// to its own track, so nothing it sends comes back to it.
//
// The hot path is Track.Publish: the packet was read once into a pooled
// Packet; Publish hands the same Packet to every subscriber's Sink with a
// reference count instead of a copy. Sinks must not block: each keeps a
// bounded queue, drops when it is full, and counts what it dropped.
//
// Ownership: the subscriber list of a track is a copy-on-write slice
// (atomic pointer) so Publish takes no lock. Room mutations take the room's
// mutex; no Sink is ever called with that mutex held.
package broker
