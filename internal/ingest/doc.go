// Package ingest is an RTP endpoint with no session: a UDP port pair (RTP,
// and RTCP on the next port or muxed) that any RTP tool sends its streams
// to, the way Voyager's recording endpoint took them. Each source address
// and media kind becomes one track of a private broker room, so whatever
// taps a room (the recorder) takes them as it takes a session's.
//
// Who may send: only the source IPs the endpoint was opened for (by
// default the IP of the caller that asked for it); datagrams from any other
// address are dropped and counted before they are parsed. What it costs
// them: the datagrams they send, at most MaxStreams tracks, and nothing
// back: the endpoint never sends a packet. A payload type the endpoint was
// not told of and RFC 3551 does not define is dropped with a reason
// (unknown_pt), because its media kind is unknown.
package ingest
