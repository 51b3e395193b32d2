// Package peerdelay measures this node's delay to every other node of the
// cluster over NATS (issue 16, link monitoring): every interval (the
// heartbeat's, 2 s) it sends each node the registry lists an empty request
// on convene.ping.<node> and times the reply, with a timeout shorter than
// the interval. Per peer it keeps a smoothed round-trip time (RFC 6298
// section 2: SRTT ← 7/8 SRTT + 1/8 R) and the share of its last 16 probes
// that got no reply.
//
// Each node answers the requests on its own subject at once with an empty
// reply (Responder), so what is measured is the NATS path both ways (the
// servers and their routes) plus both nodes' NATS read loops: the delay a
// bridged packet or a control message sees, not the ICMP round trip.
//
// The node puts the table in its heartbeat (bus.Load.Peers), the registry's
// Choose prefers nearer nodes among those with room, and /metrics has
// convene_cluster_peer_rtt_seconds{peer} and
// convene_cluster_peer_loss_ratio{peer}, one series per node the registry
// lists (bounded by the cluster's size; a forgotten node's series go).
//
// Ownership: the Pinger's table is guarded by one mutex, held only to read
// or update it; probes run on goroutines of their own, one per peer per
// round, and all end before the next round starts.
package peerdelay
