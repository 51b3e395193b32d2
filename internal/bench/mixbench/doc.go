// Package mixbench measures Convene's audio mixing beside Janus AudioBridge
// (Debian's janus package) under the same load: S sessions (AudioBridge
// rooms) of 10 members, 6 of them speaking, 20 ms frames, in G.711 μ-law
// and in Opus. Every member is a plain RTP endpoint of the benchmark
// process, with an address of its own in 127.0.0.0/8 on a few shared UDP
// sockets (as package loadgen's listeners): the 6 speakers send a
// pre-encoded tone with a syllable-rate envelope, the 4 others one frame of
// silence when they join and nothing after (what a phone with silence
// suppression sends), and every member receives its mix.
//
// For each server and codec the number of sessions grows step by step; a
// step measures, over a window after a warm-up, the server's CPU (from
// /proc; the server pinned to CPU 0, the load on the others) and, per
// receiver, the mixed frames received against the 50 a second expected,
// how late each arrived against the 20 ms grid of its RTP timestamps, and
// the RFC 3550 jitter. The answer is the most sessions at the bar (see
// Bar) and the sessions per core there.
package mixbench
