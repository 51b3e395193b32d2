// Package sfu puts browsers (and WHIP and WHEP clients) into sessions: a
// selective forwarding unit over pion/webrtc.
//
// A browser member has two peer connections (docs/signalling.md): a
// publisher connection it offers on, whose tracks the node reads and
// publishes on broker tracks like any other link's, and a subscriber
// connection the node offers on, which carries the room's other tracks. Every
// track a peer sends or receives is a live link of the session
// (session.AttachLive), so floors, subgroups and no-echo-per-member apply
// to it unchanged.
//
// The node terminates RTCP: its interceptors answer NACKs from their own
// per-track history and send their own receiver and sender reports; a
// subscriber's PLI or FIR reaches the publisher as one throttled PLI
// (Track.RequestKeyframe). A simulcast source's layers are separate broker
// tracks; each subscriber's downTrack forwards one of them, chosen by its
// bandwidth estimate (TWCC, GCC) or by hand, switching on a keyframe with
// sequence numbers and timestamps kept continuous.
//
// Hot path: a publisher's read loop reads each packet into a pooled
// media.Packet and publishes it; a subscriber's sink queues it (bounded,
// dropping when full) for the peer's writer goroutine, which rewrites the
// header for that subscriber and hands it to pion, which encrypts and sends.
package sfu
