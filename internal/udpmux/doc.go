// Package udpmux is one UDP socket shared by many media links: datagrams are
// read once into pooled media packets and handed to the link registered for
// their source address, and packets for many destinations leave through a
// few writer goroutines (one per CPU by default; a destination always uses
// the same one, so its packets stay in order), with one sendto per datagram
// or in sendmmsg batches (Options.Batch).
//
// Sharing a socket is the single-port mode of mediasoup's WebRtcServer and
// LiveKit's UDP mux: a meeting of thousands needs one port, not thousands,
// and one sendmmsg call can serve many subscribers of the same packet.
//
// Each writer keeps two queues, audio and video. Audio always goes first: a
// writer in the middle of a video burst looks at the audio queue between
// batches, so an audio packet waits behind at most one batch of video.
// Every destination (Dest) has a bound on its packets in flight; when it is
// reached the packet is dropped for that destination only and counted.
package udpmux
