// Package transcode turns a track into a codec its receivers can take: a
// SIP phone's G.711 into Opus for browsers (the seed's transcoding media
// service, chosen per receiver).
//
// A Stream serves one source track of a room and every receiver that
// wants it in Opus: it taps the track (broker.Room.Tap), decodes each
// packet on a goroutine of its own, resamples to 48 kHz, cuts 20 ms
// frames, encodes each frame once and hands the one packet to every
// receiver. It exists while someone receives it. Its goroutine beats for
// the supervisor (package supervise) and, if it panics or hangs, the
// supervisor starts it again with fresh codec state.
package transcode
