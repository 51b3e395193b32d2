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
// speed s timestamps advance 1/s as fast as the recording's, so a video
// receiver shows frames at the new pace. Audio is not time-stretched: at
// a speed other than 1× its packets come faster or slower than they play,
// which an adaptive jitter buffer (a browser's) absorbs by stretching or
// compressing; a plain receiver may not.
package playback
