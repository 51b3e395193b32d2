// Package hls makes a session a low-latency HLS stream for passive
// viewers: the seed's streaming producer. The chair starts it; the node
// then runs one ffmpeg child per session (package ffmpeg) that only
// encodes the video: one camera (the active speaker's, once the one
// shown has been on for Options.SpeakerHold, 2 s; else the first video
// track; of a simulcast camera the layer broker.Room.Best names,
// the highest heard in the last 2 s; or a grid composite), fed over local
// RTP, or a black card while the session has none (or its camera made no
// frame for Stall: then for CardFor). Every picture is 640×360 (Frame),
// so the parameter sets never change. The child encodes
// H.264 (libx264, zerolatency, no B-frames, a keyframe every segment) and
// sends it back to the node over local RTP; the node rebuilds its access
// units and muxes them, with the session's audio mix as it is (a mixer
// output, Opus), in gohlslib's low-latency muxer: fMP4 segments of
// Options.Segment (streaming.hls_segment, 1 s) made of parts of about
// 200 ms, blocking playlist reloads
// (_HLS_msn, _HLS_part, _HLS_skip) and preload hints, which the API
// serves from memory.
//
//	room ──▶ mixer (main session) ──Opus RTP──────────────────────────────────▶ ┐
//	room ──▶ Tap(speaker's video) ──VP8/H.264──▶ Feed ──RTP──▶ ffmpeg -i stream.sdp   gohlslib.Muxer ──▶ Serve
//	                           (or -f lavfi color, no camera)  (libx264) ──RTP H.264──▶ ┘ (index.m3u8, video1_stream.m3u8,
//	                                                                                    audio2_stream.m3u8, init, seg, part)
//
// Both inputs go through a timeline each (their RTP timestamps, anchored
// to one epoch's wall clock; a new child or a jump starts a new run, a
// burst closes in), so audio and video share one time line. Every viewer
// gets the same playlists: a player with LL-HLS reloads them blocking and
// fetches parts; one without fetches whole segments. Only Apple's own
// player gets the gap entries gohlslib opens a new stream's media
// playlists with; every other player gets them without (gaps.go: VLC 3.0
// fetches a gap and stops). The multivariant
// playlist names the video and the mix as an audio rendition.
//
// The child beats with its -progress lines; it is started again when it
// exits and killed when its beats stand still (package supervise); the
// muxer, and so the playlists, go on across children. A change between
// having a camera and having none, or of the camera's codec, starts a new
// child. While a child has made no frame, its camera's feed asks for a
// keyframe every 2 s (ffmpeg.Proc.CheckKeyframes).
//
// Answers are kept per stream (Service.Serve): files (init sections,
// segments, parts) never change once made, playlists until the muxer's
// next write, so most requests are answered from a copy with its length;
// of the requests for one name and query that find none, one asks
// gohlslib and the others wait for it. A request that may wait on the
// muxer (a playlist, a part) is held at most Options.Hold (503 after) and
// a stream has at most Options.HeldMax handlers waiting (503 beyond),
// counted by convene_hls_held_requests. At most Options.Max streams
// (streaming.hls_max) run on a node (ErrCapacity).
package hls
