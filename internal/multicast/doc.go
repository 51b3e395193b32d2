// Package multicast bridges a session (a broker.Room) to an IP multicast
// group, the way the Access Grid and the MBone tools (vic, rat) meet: every
// participant sends RTP to one group address and port, RTCP to port+1, and
// hears everyone else there.
//
// A Bridge is one member of the room for one media kind. In both directions
// it moves datagrams byte for byte:
//
//   - group -> session: two receive sockets, bound to the group address (not
//     0.0.0.0, so unicast traffic to the same port is not taken) on the RTP
//     port and port+1 with SO_REUSEADDR and SO_REUSEPORT, so the bridge can
//     share the ports with vic or rat on the same host, and joined to the
//     group on the configured interface. Each datagram is read once into a
//     pooled media.Packet, checked with media.Classify / ClassifyRTCP, and
//     published on the bridge's track (RTP) or with Room.PublishRTCP (RTCP).
//   - session -> group: the bridge subscribes to the room's other tracks of
//     its kind and to their RTCP, and queues each packet on a separate
//     udpmux.Socket (an ephemeral port on the interface's address) whose
//     batched writer sends it to the group (RTCP to port+1) with the
//     configured TTL on the configured interface. Multicast loopback is on,
//     so other tools on the same host hear the session.
//
// Direction is the group's, as in rtplink: "sendrecv" bridges both ways,
// "sendonly" only brings the group's media into the session, "recvonly"
// only sends the session's media to the group. RTCP from the group is
// published into the session in every direction, so the session's senders
// get the group's receiver reports.
//
// # Loop prevention
//
// A multicast bridge hears what it sends: loopback is on, and other bridges
// or reflectors on the group may repeat it. Publishing that back into the
// room would echo every participant to itself and, with two bridges on one
// group, loop forever. In the spirit of RFC 3550 §8.2 the bridge drops, and
// counts as "loop":
//
//  1. datagrams whose source address is the send socket's own address
//     (ip:port): our own sends looped back by the kernel;
//  2. datagrams whose SSRC (octets 8–11 of RTP, 4–7 of RTCP) the bridge has
//     itself sent to the group: the session's own streams, coming back by
//     another path. The set of sent SSRCs is recorded as packets leave; it
//     holds at most 1024 entries in two generations, so an SSRC that is
//     still being sent is never forgotten while stale ones age out.
//
// Within the room, the broker never subscribes a member to its own track,
// so what the bridge publishes is not sent back to the group either.
//
// The receive path takes no lock while calling into the room and allocates
// nothing per packet in steady state.
package multicast
