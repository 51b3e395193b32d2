package sfu

import (
	"testing"

	"github.com/pion/webrtc/v4"

	"github.com/convene/convene/internal/vtranscode"
)

// offerOf is a WHEP viewer's offer with one video section of these lines.
func offerOf(video string) string {
	return "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n" +
		"m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:111 opus/48000/2\r\na=recvonly\r\n" +
		video
}

// TestViewerVideo: a viewer's video track takes the sources' codec when
// its offer has it, else the offer's first of VP8 and H.264, with what its
// fmtp and imageattr allow; an offer of neither keeps the sources' codec.
func TestViewerVideo(t *testing.T) {
	h264Only := offerOf("m=video 9 UDP/TLS/RTP/SAVPF 102 45\r\nc=IN IP4 0.0.0.0\r\n" +
		"a=rtpmap:102 H264/90000\r\na=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f\r\n" +
		"a=rtpmap:45 AV1/90000\r\na=imageattr:102 recv [x=640,y=360]\r\na=recvonly\r\n")
	both := offerOf("m=video 9 UDP/TLS/RTP/SAVPF 102 96\r\nc=IN IP4 0.0.0.0\r\n" +
		"a=rtpmap:102 H264/90000\r\na=fmtp:102 packetization-mode=1;profile-level-id=42e01f\r\n" +
		"a=rtpmap:96 VP8/90000\r\na=fmtp:96 max-fs=920;max-fr=15\r\na=imageattr:* recv [x=320,y=180]\r\na=recvonly\r\n")
	av1 := offerOf("m=video 9 UDP/TLS/RTP/SAVPF 45\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:45 AV1/90000\r\na=recvonly\r\n")
	vp8 := codecVP8.RTPCodecCapability
	for _, c := range []struct {
		name, offer string
		want        string
		target      vtranscode.Target
	}{
		{"H.264 only", h264Only, webrtc.MimeTypeH264, vtranscode.Target{Codec: webrtc.MimeTypeH264, Width: 640, Height: 360, FPS: 30}},
		{"both: the sources' VP8", both, webrtc.MimeTypeVP8, vtranscode.Target{Codec: webrtc.MimeTypeVP8, Width: 320, Height: 180, FPS: 15}},
		{"neither", av1, webrtc.MimeTypeVP8, vtranscode.Target{Codec: webrtc.MimeTypeVP8}},
	} {
		got, tgt := viewerVideo(c.offer, vp8)
		if got.MimeType != c.want || tgt != c.target {
			t.Errorf("%s: %s %+v, want %s %+v", c.name, got.MimeType, tgt, c.want, c.target)
		}
	}
}
