// Package hls makes a session an HLS stream for passive viewers: the
// seed's streaming producer. The chair starts it; the node then runs one
// ffmpeg child per session (package ffmpeg), fed over local RTP with the
// session's audio mix (a mixer output, Opus) and one camera (the active
// speaker's, else the first video track; of a simulcast camera the layer
// broker.Room.Best names, the highest heard in the last 2 s), which encodes H.264 and AAC and
// writes 2 s MPEG-TS segments and a rolling playlist into the stream's
// directory, which the API serves.
//
//	room ──▶ mixer (main session) ──Opus──▶ Feed ──RTP──▶ ┐
//	room ──▶ Tap(speaker's video)  ──VP8──▶ Feed ──RTP──▶ ffmpeg -i stream.sdp ──▶ <dir>/<session>/index.m3u8, seg*.ts
//	                                                      (libx264, aac, -f hls)
//
// The child beats with its -progress lines; it is started again when it
// exits and killed when its beats stand still (package supervise). A new
// child appends to the playlist after a discontinuity. A change between
// having a camera and having none starts a new child with the other SDP.
// While a child has made no frame, its camera's feed asks for a keyframe
// every 2 s (ffmpeg.Proc.CheckKeyframes).
// At most Options.Max streams (streaming.hls_max) run on a node (ErrCapacity).
package hls
