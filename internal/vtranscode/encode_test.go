package vtranscode

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/convene/convene/internal/testutil"
)

// TestKeyframesFollowTheSource: the encoder options make a keyframe out of
// every keyframe in, or the next frame when the rate cap drops it (a PLI's
// keyframe from the publisher becomes one for the receivers), also off the
// encoder's own 2 s GOP, and cap the size and rate. ffmpeg encodes a VP8 source with keyframes at 0, 1.3 and 2.6 s only
// (15 fps), then transcodes it to H.264 with EncodeArgs of a 160×90, 10 fps
// class; ffprobe reads the keyframes' times and the pictures.
func TestKeyframesFollowTheSource(t *testing.T) {
	bin := testutil.NeedBinary(t, "ffmpeg")
	probe := testutil.NeedBinary(t, "ffprobe")
	dir := t.TempDir()
	src, out := filepath.Join(dir, "src.webm"), filepath.Join(dir, "out.mp4")
	run := func(name string, args ...string) string {
		t.Helper()
		b, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, b)
		}
		return string(b)
	}
	run(bin, "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=15:duration=4",
		"-c:v", "libvpx", "-g", "1000", "-force_key_frames", "0,1.3,2.6", src)
	run(bin, append(append([]string{"-hide_banner", "-loglevel", "error", "-y", "-i", src}, EncodeArgs(Target{Codec: H264, Width: 160, Height: 90, FPS: 10})...), out)...)
	var keys []float64
	frames, width := 0, 0
	for _, l := range strings.Split(run(probe, "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=key_frame,pts_time,width",
		"-of", "csv=p=0", out), "\n") {
		f := strings.Split(strings.TrimSpace(l), ",")
		if len(f) < 3 {
			continue
		}
		frames++
		width, _ = strconv.Atoi(f[2])
		if at, err := strconv.ParseFloat(f[1], 64); err == nil && f[0] == "1" {
			keys = append(keys, at)
		}
	}
	t.Logf("%d frames, %d wide, keyframes at %v", frames, width, keys)
	for _, want := range []float64{0, 1.3, 2.6} {
		found := false
		for _, k := range keys {
			// The source's keyframe, or the next frame out when the rate
			// cap dropped it (at 10 fps, 0.1 s later).
			found = found || (k >= want-0.05 && k <= want+0.15)
		}
		if !found {
			t.Errorf("no keyframe out at the source's keyframe at %.1f s: %v", want, keys)
		}
	}
	if width != 120 || frames < 30 || frames > 42 {
		t.Errorf("%d frames %d wide over 4 s, want about 40 (10 fps) 120 wide", frames, width)
	}
}
