package hls

import (
	"strings"
	"testing"
)

const gappy = `#EXTM3U
#EXT-X-VERSION:10
#EXT-X-TARGETDURATION:1
#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,PART-HOLD-BACK=0.66750,CAN-SKIP-UNTIL=6.00000
#EXT-X-PART-INF:PART-TARGET=0.26700
#EXT-X-MEDIA-SEQUENCE:3
#EXT-X-MAP:URI="4c34edf2766a_video1_init.mp4"
#EXT-X-GAP
#EXTINF:1.00000,
gap.mp4
#EXT-X-GAP
#EXTINF:1.00000,
gap.mp4
#EXTINF:1.00000,
4c34edf2766a_video1_seg5.mp4
#EXT-X-PROGRAM-DATE-TIME:2026-11-27T16:57:10.055Z
#EXT-X-PART:DURATION=0.26667,URI="4c34edf2766a_video1_part4.mp4",INDEPENDENT=YES
#EXT-X-PRELOAD-HINT:TYPE=PART,URI="4c34edf2766a_video1_part5.mp4"
`

// TestStripGaps: the leading gaps go, the media sequence moves past them
// (the first real segment keeps its number 5), the rest stays as it was;
// a delta update or a playlist without gaps is left alone.
func TestStripGaps(t *testing.T) {
	got := string(stripGaps([]byte(gappy)))
	want := strings.Replace(strings.Replace(gappy, "#EXT-X-MEDIA-SEQUENCE:3", "#EXT-X-MEDIA-SEQUENCE:5", 1),
		"#EXT-X-GAP\n#EXTINF:1.00000,\ngap.mp4\n", "", 2)
	if got != want {
		t.Errorf("stripped:\n%s\nwant:\n%s", got, want)
	}
	for _, pl := range []string{want, strings.Replace(gappy, "#EXT-X-MAP", "#EXT-X-SKIP:SKIPPED-SEGMENTS=1\n#EXT-X-MAP", 1),
		strings.Replace(gappy, "#EXT-X-MEDIA-SEQUENCE:3", "#EXT-X-MEDIA-SEQUENCE:x", 1), "#EXT-X-GAP\n"} {
		if got := string(stripGaps([]byte(pl))); got != pl {
			t.Errorf("changed:\n%s\ninto:\n%s", pl, got)
		}
	}
}

func TestAppleNative(t *testing.T) {
	for ua, want := range map[string]bool{
		"AppleCoreMedia/1.0.0.21A329 (iPhone; U; CPU OS 17_0 like Mac OS X; en_us)":                                             true,
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15": true,
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36":                 false,
		"VLC/3.0.24 LibVLC/3.0.24": false,
		"Lavf/59.27.100":           false,
		"":                         false,
	} {
		if got := appleNative(ua); got != want {
			t.Errorf("%q: %v, want %v", ua, got, want)
		}
	}
}
