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
// subscribes to the track's subject and says it wants it; the publishing
// node taps the local track (broker.Room.Tap, after the floor gate) only
// while some node wants it. Remote tracks are never announced again, so
// media cannot loop.
//
// A packet crosses as one NATS message on convene.m.<node>.<n>, where n
// numbers the tracks a node exports across all its rooms (short subjects:
// NATS frames each message with its subject): a 5-byte envelope, then the
// RTP packet unchanged (same SSRC, sequence numbers and timestamps):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|V=1|K|R| flags |        track number n (uint32) …              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| … n (cont.)   |  RTP packet …
//	+-+-+-+-+-+-+-+-+-------------------
//
// V is the envelope version, K the kind (0 audio, 1 video), R set for
// RTCP, flags zero. Audio and video travel on separate
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
// kick it. Packets leave through one bounded queue and sender goroutine
// per kind: a full queue drops and counts, never blocking the publisher.
package bridge
