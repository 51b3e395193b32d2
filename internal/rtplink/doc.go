// Package rtplink attaches plain RTP endpoints to a session: the seeds'
// RTPLink. A link is one remote endpoint (an RTP tool, ffmpeg, vic, rat) of
// one media kind. It reads the endpoint's datagrams from the node's shared
// RTP and RTCP sockets, checks that they are RTP (or RTCP), and publishes
// them on the endpoint's track; it sends the room's other tracks of its kind
// back to the endpoint, byte for byte.
//
// Direction is the endpoint's, as in SDP: "sendonly" endpoints only send to
// the session, "recvonly" endpoints only receive from it.
package rtplink
