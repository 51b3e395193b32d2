// Package bridge spans a session's broker room across the nodes of a
// cluster over NATS: the seeds' broker network, where each packet crosses
// to a node once and fans out there ("software multicast within each
// institution").
//
// Every node that has a session's room announces the room's tracks that
// its own links publish, and which other nodes' tracks it wants, on
// convene.media.<session>.state.<node> (JSON; at once on a change, then
// every Options.Announce while another node has the session, every ten
// of them while none has; a node not heard for Options.Expire is
// forgotten). Another node's track appears in the local room as a member
// that sends (ID "bridge:<node>:<n>"), with the publisher's session member
// as its Owner and its subgroup as its Group, so the room's own rules —
// no echo per owner, subgroups — hold across nodes. While that member's
// track has local subscribers (broker.Member.OnSubscribers) the node
// says it wants it; the publishing node taps the local track
// (broker.Room.Tap, after the floor gate) only while some node wants it,
// and sends each packet once to each node that wants it. Remote tracks
// are never announced again, so media cannot loop.
//
// Packets cross in batches: a node gathers one kind's packets by the node
// they go to and sends each node's as one NATS message on
// convene.m.<to>.<a|v>.<from> (a kind each), when the oldest has waited Options.Batch
// (nats.media_batch), when the batch reaches Options.MaxBatch bytes, or,
// with no window, as soon as the sender runs. Every message costs both
// nodes and every NATS server on the way a wake-up, a read and a parse,
// whatever it carries; at a few thousand packets a second, one message
// per packet cost a node more to receive than to deliver a packet to six
// endpoints. A node subscribes once per kind, to convene.m.<self>.a.* on its
// audio connection and convene.m.<self>.v.* on its video one. A
// message is records, each a 5-byte envelope, a 2-byte length and the
// RTP packet unchanged (same SSRC, sequence numbers and timestamps); n
// numbers the tracks a node exports across all its rooms, so (from, n)
// names a track:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|V=1|K|R| flags |        track number n (uint32) …              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| … n (cont.)   |     length (uint16)           |  RTP packet …
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-------------
//
// V is the envelope version, K the kind (0 audio, 1 video), R set for
// RTCP (never set in a batch), flags zero. A record of a track the node
// does not pull (any more) is let go; a malformed one ends its message
// and counts as dropped. Audio and video travel on separate
// connections (Options.Audio, Options.Video), so an audio packet never
// waits behind a video burst in one connection's buffer, and on the
// receiving node both enter the room like any publisher's packets, where
// the udpmux writers send audio first.
//
// A receiver's keyframe request for a remote video track (broker.Member.
// Keyframe) goes to the track's node on convene.media.<session>.key.<node>
// (4 bytes: n), at most every 300 ms per track, and that node asks its
// sender (broker.Track.RequestKeyframe, throttled there again).
//
// The RTCP the room's own endpoints send (broker.Room.TapRTCP: sender
// reports, receiver reports, BYE) goes, while other nodes have the
// session, to convene.media.<session>.rtcp.<node>: the envelope with R set
// and n 0, a byte of length and the sender's session member (its owner, at
// most 255 bytes), then the compound packet. The other nodes publish it in
// their rooms as that owner's (broker.Room.PublishRemoteRTCP): it reaches
// every endpoint of the kind that takes RTCP except the owner's own (no
// echo, so no endpoint sees its own SSRC come back) and no tap, so it
// never crosses again. RTCP is broadcast in a session as on one node (as
// in an RTP multicast session): a remote sender's reports reach every
// receiver, and receivers' reports reach every sender.
//
// Concurrency: each spanned room has one goroutine that owns its state
// (remote members, wants, taps); room callbacks and state messages only
// kick it. A track's packets are copied into the batches under a mutex
// on the publisher's goroutine; one goroutine per kind publishes them,
// and a node's batches past MaxWaiting bytes (NATS not keeping up) drop
// and count, never blocking the publisher. RTCP leaves through a bounded
// queue and sender goroutine per kind.
package bridge
