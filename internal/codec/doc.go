// Package codec turns RTP audio payloads into 16-bit mono PCM and back
// for the mixer: G.711 μ-law and A-law (tables in package audio), L16
// (RFC 3551, big-endian) and Opus (libopus through cgo, with
// gopkg.in/hraban/opus.v2).
//
// A Spec names a codec as SDP's rtpmap does ("PCMU/8000", "opus/48000/2",
// "L16/16000") with its payload type. G.722 is not offered: no well-kept
// Go or cgo implementation is packaged here.
package codec
