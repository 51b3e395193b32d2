// Package loadgen generates the seed's benchmark streams and measures what
// arrives (av-service-architecture-single-broker-performance, section 4).
//
// Streams: audio is one 252-byte RTP packet every 30 ms; video is a
// deterministic synthetic H.263-like trace at 15 frames/s whose frames over
// 1 KB are split into several packets (≈3.1 per frame, ≈740 bytes each,
// ≈280 kb/s) with a full-picture update of 10–18 packets every 60 frames.
//
// Every packet carries, after its RTP header, the time it was sent, its
// meeting and its index in the stream, so a receiver in the same process
// computes latency, RFC 3550 jitter, loss and late arrivals (over 100 ms,
// counted as lost) without clock synchronisation. The first 100 packets of
// each stream are ignored, as in the seed.
package loadgen
