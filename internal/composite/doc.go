// Package composite makes one video of several: a session's chosen
// cameras in a 2×2 or 3×3 grid, or the active speaker large with the
// others small beneath, each with its member's name, encoded once as VP8
// or H.264 and published as a track of the session's room, for the
// endpoints that take a single video (SIP video phones, HLS, a recording
// exported to one file).
//
// The engine is Debian's ffmpeg as a supervised child (package ffmpeg),
// fed and drained over local RTP:
//
//	room ─▶ Tap(camera i) ─▶ ffmpeg.Feed (own SSRC, seq, ts) ─UDP 127.0.0.1:Pi─▶ ┐
//	                                      sender reports every 500 ms (one clock) │
//	ffmpeg -i composite.sdp (an m-line per shown camera)                          ◀┘
//	    fps, scale + pad into its cell, drawtext (the member's name) ─▶ xstack (black
//	    for empty cells) ─▶ libvpx realtime | libx264 ultrafast zerolatency ─▶ -f rtp
//	─UDP 127.0.0.1:O─▶ ffmpeg.Output: own SSRC, sequence numbers and timestamps that
//	    run on across children ─▶ broker.Track.Publish (a session member's live link)
//
// A composite's goroutine looks at the room every 500 ms. When the cameras
// to show change (one joins, leaves or falls silent for 2 s; the active
// speaker changes in the speaker layout; a member is renamed), it writes a
// new SDP, filter and names and ends the child; the Proc starts the next
// one at once. A restart costs the subscribers a keyframe's wait, not a
// new stream: the outlet keeps one SSRC and continues the sequence numbers
// and timestamps. ffmpeg's filter graph is fixed once configured (xstack's
// inputs, drawtext's text), so a restart is the one way to change it that
// ffmpeg 5.1 offers; a graph of fixed cells fed by a switcher on our side
// would need decoded frames here, which Go has no library for.
//
// Only cameras that sent within the last 2 s are shown: ffmpeg's frame
// sync waits for every input, so a silent camera would freeze the whole
// picture. Of a simulcast camera, the highest layer heard is shown
// (broker.HighestOf).
//
// Each feed asks its camera's publisher for a keyframe (a PLI to a
// browser) when tapped and when a child starts; while a child has made
// no frame, every 2 s again (a keyframe sent before ffmpeg bound its
// port is lost; ffmpeg.Proc.CheckKeyframes). A camera whose feed has
// waited 6 s for a keyframe (it sends only frames that refer to one it
// never sent and does not answer the requests: a plain RTP camera with a
// long GOP, a broken sender) would freeze the picture as a silent one
// would: it is left out (convene_composite_keyless_cameras_total) and
// watched, asked for a keyframe every 10 s, until it sends one; then it
// is shown again. A camera whose keyframes come further apart than 6 s
// is shown and left out in turn.
//
// At most Options.Max composites run on a node (composite.max, ErrLimit);
// a new one is also refused when the running composites' measured CPU
// plus one more's would pass Options.Cores (ErrCapacity), or the node's
// capacity governor refuses its packets.
package composite
