// Package vtranscode gives a video track to receivers that cannot decode
// its codec: a VP8 camera to an H.264-only WHEP viewer, an H.264 one to a
// VP8-only receiver, scaled down and slowed to what the receiver says it
// takes (the transcoding media service of the seed, chosen per receiver).
//
// A Transcoder serves one source track in one Target (codec, picture size
// class, frame rate class) for every receiver that needs it, and exists
// while one does. Its engine is Debian's ffmpeg as a supervised child
// (package ffmpeg), fed and drained over local RTP:
//
//	room ─▶ Tap(source) ─▶ ffmpeg.Feed (own SSRC, seq, ts; waits for a keyframe)
//	  ─UDP 127.0.0.1:P─▶ ffmpeg -i in.sdp ─▶ scale (size cap) ─▶ -r, -fps_mode vfr (rate cap)
//	     ─▶ libx264 (ultrafast, zerolatency, constrained baseline) | libvpx (realtime)
//	        -force_key_frames source: a keyframe out for every keyframe in
//	  ─UDP 127.0.0.1:O─▶ ffmpeg.Output (one SSRC, numbering continuous across children)
//	  ─▶ the transcoder's own broker track, in a private room ─▶ each receiver's sink
//
// A receiver's keyframe request (Sub.Keyframe) asks the source's publisher
// for one; the child's decoder marks it and the encoder is forced to make
// its next frame a keyframe too (-force_key_frames source). A publisher
// that cannot be asked (a plain RTP sender) still gives a keyframe every
// 2×FPS frames through the encoder's GOP (2 s at the class's rate).
//
// The child beats on its -progress pipe; package supervise kills one whose
// beats stand still for a second, and the Proc starts the next at once.
// Admission (Hub.Subscribe for a new Target): at most Options.Max
// transcoders, their measured CPU within Options.Cores, and the node's
// capacity governor; a refusal wraps capacity.ErrOverCapacity.
package vtranscode
