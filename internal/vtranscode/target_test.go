package vtranscode

import (
	"strings"
	"testing"
)

// TestFromSDP: what a receiver's fmtp and imageattr say becomes its
// target; an H.264 level bounds the picture and rate by Table A-1.
func TestFromSDP(t *testing.T) {
	for _, c := range []struct {
		codec, fmtp, attr string
		want              Target
	}{
		{H264, "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f", "", Target{H264, 1280, 720, 30}},
		{H264, "packetization-mode=1;profile-level-id=42e00d", "", Target{H264, 320, 180, 30}},             // level 1.3: 396 MBs
		{H264, "packetization-mode=1;profile-level-id=42e00d;max-fs=3600", "", Target{H264, 1280, 720, 3}}, // max-fs raises the size, the rate follows max-mbps
		{VP8, "max-fs=920;max-fr=15", "", Target{VP8, 640, 360, 15}},
		{VP8, "", "recv [x=480,y=270] send [x=1920,y=1080]", Target{VP8, 480, 270, 0}},
		{VP8, "max-fs=3600", "recv [x=[320:640],y=[180:360]]", Target{VP8, 640, 360, 0}},
		{VP8, "", "*", Target{VP8, 0, 0, 0}},
	} {
		if got := FromSDP(c.codec, c.fmtp, c.attr); got != c.want {
			t.Errorf("FromSDP(%s, %q, %q) = %+v, want %+v", c.codec, c.fmtp, c.attr, got, c.want)
		}
	}
}

// TestClass: a target falls into the largest size and rate class within
// both its own limits and the hub's caps; receivers of nearby limits share.
func TestClass(t *testing.T) {
	for _, c := range []struct {
		in, want Target
		ok       bool
	}{
		{Target{Codec: "video/h264"}, Target{H264, 1280, 720, 30}, true},
		{Target{VP8, 700, 400, 20}, Target{VP8, 640, 360, 15}, true},
		{Target{VP8, 100, 50, 2}, Target{VP8, 160, 90, 5}, true},
		{Target{Codec: "video/AV1"}, Target{}, false},
	} {
		got, ok := c.in.class(1280, 720, 30)
		if got != c.want || ok != c.ok {
			t.Errorf("class(%+v) = %+v %v, want %+v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestFilter: the graph caps the size it is given.
func TestFilter(t *testing.T) {
	f := Filter(Target{H264, 640, 360, 15})
	for _, want := range []string{`min(iw\,640)`, `min(ih\,360)`, "force_original_aspect_ratio=decrease"} {
		if !strings.Contains(f, want) {
			t.Errorf("filter %q lacks %q", f, want)
		}
	}
}

// FuzzFromSDP: a receiver's fmtp and imageattr are outside input; no
// value makes FromSDP panic or ask for more than the largest class, and
// every target falls into a class within the caps.
func FuzzFromSDP(f *testing.F) {
	f.Add("packetization-mode=1;profile-level-id=42e01f;max-fs=8160;max-mbps=244800", "recv [x=[320:1920],y=[180:1080]]")
	f.Add("max-fs=99;max-fr=5", "recv [x=640,y=360,sar=1.0] send [x=1280,y=720]")
	f.Add("profile-level-id=zz", "recv [x=[320,640],y=[")
	f.Fuzz(func(t *testing.T, fmtp, attr string) {
		for _, codec := range []string{VP8, H264} {
			c, ok := FromSDP(codec, fmtp, attr).class(1280, 720, 30)
			if !ok || c.Width > 1280 || c.Height > 720 || c.FPS > 30 || c.Width <= 0 || c.FPS <= 0 {
				t.Fatalf("FromSDP(%q, %q) falls into %+v %v", fmtp, attr, c, ok)
			}
		}
	})
}
