// Package audio is the signal path the mixer is built on (issue 14): 16-bit
// linear PCM frames, the G.711 μ-law and A-law codecs, sample-rate
// conversion between 8, 16 and 48 kHz, mix-minus (every listener hears the
// sum of the others, never itself) and RFC 6464 levels measured from PCM.
//
// It imports nothing of ours and allocates nothing per frame: callers own
// their buffers. Nothing here is wired into a session yet.
package audio
