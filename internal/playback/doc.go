// Package playback replays a recording's RTP streams with their original
// timing, as rtpplay does: each packet is sent when its arrival offset in
// the rtpdump file comes round, and the streams keep the relationship
// their sender reports (else their arrivals) gave them (export.Open
// places them; a stream's packets move by its Shift). Pause, resume, seek
// (video from the last keyframe before the target) and speed 0.5×–2×.
//
// Player is the timing, with no goroutine and no clock of its own: every
// call takes the time it is made at, so tests drive it with any times
// they like. Playback runs a Player on a Clock (Real, or a test's) in one
// goroutine that owns it; its methods send it requests. Service plays
// recordings into live sessions: a session member named after the
// recording with one live link per stream.
//
// Every stream is sent with an SSRC of its own, sequence numbers that
// run on without a jump, and timestamps that advance with the time the
// receiver sees: after a seek, a pause or a speed change the next packet's
// timestamp is the last one's plus the wall time between them, and at
// speed s a video stream's timestamps advance 1/s as fast as the
// recording's, so a receiver shows frames at the new pace. Audio at a
// speed other than 1× is time-stretched (stretch.go): decoded, made
// faster or slower at its own pitch by WSOLA (audio.Stretcher), encoded
// again in its own codec and sent as 20 ms packets every 20 ms, so any
// receiver, a phone's fixed jitter buffer too, hears sped-up speech and
// not a chipmunk. At 1× the recorded packets go out as they are. A codec
// the node cannot encode (not G.711, G.722, L16 or Opus) falls back to
// its packets sent faster or slower with scaled timestamps.
//
// The recording's chat lines (the time line's "message" events) are said
// again in the session at their places among the media, "[Ada] hello",
// by the playback's member (Options.Chat; text.go).
package playback
