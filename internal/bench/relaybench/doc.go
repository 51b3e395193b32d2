// Package relaybench measures RTP relays side by side: Convene's relay (a
// `convene relay` process) and rtpengine in userspace, both driven over
// rtpengine's ng control protocol by the same code, on loopback.
//
// Two measurements, after the seed's RTP-Relay section
// (sip-voip-server-performance-enhancement, Table 2 and Table 4):
//
//   - Throughput: a few calls carry datagrams of one size in both directions
//     as fast as one sending thread can push them; what the relay delivers
//     per second is its packets/s for that size.
//   - Capacity: N concurrent G.711 calls (172-byte packets, 20 ms, both
//     directions, 100 packets/s per call through the relay); the largest N
//     with zero loss, found by bisection.
//
// The machine probe of package brokerbench (one sendmmsg thread to receiving
// sockets, no per-packet work) runs for each size too, and each relay is
// reported as a fraction of it.
package relaybench
