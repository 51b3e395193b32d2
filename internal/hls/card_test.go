package hls

import (
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/mixer"
	tu "github.com/convene/convene/internal/testutil"
)

// TestCardLL: a session without a camera streams the card (real ffmpeg)
// and the mix as LL-HLS: a multivariant playlist with the video and an
// Opus audio rendition, media playlists with parts that can block.
func TestCardLL(t *testing.T) {
	ff := tu.NeedBinary(t, "ffmpeg")
	b := broker.New()
	b.Open("s_1")
	svc := NewService(Options{Dir: t.TempDir(), FFmpeg: ff, Rooms: b.Room, Mixers: mixer.NewService(mixer.Options{})})
	defer svc.Close()
	t0 := time.Now()
	if _, _, err := svc.Start("s_1", StartOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := serveStreams(svc)
	defer srv.Close()
	code, _, mv := fetch(t, srv.URL+"/hls/s_1/index.m3u8")
	t.Logf("multivariant after %v: %d\n%s", time.Since(t0), code, mv)
	if code != 200 || !strings.Contains(mv, `CODECS="avc1.`) || !strings.Contains(mv, "opus") || !strings.Contains(mv, "TYPE=AUDIO") {
		t.Fatalf("multivariant playlist %d:\n%s", code, mv)
	}
	code, _, pl := fetch(t, srv.URL+"/hls/s_1/video1_stream.m3u8")
	t.Logf("media playlist after %v: %d\n%s", time.Since(t0), code, pl)
	for _, want := range []string{"#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES", "#EXT-X-PART:", "#EXT-X-PRELOAD-HINT:TYPE=PART", "#EXT-X-MAP:URI="} {
		if !strings.Contains(pl, want) {
			t.Errorf("the media playlist lacks %s", want)
		}
	}
	svc.mu.Lock()
	st := svc.streams["s_1"]
	svc.mu.Unlock()
	t.Logf("frames %d, audio packets %d, first frame %v after the start", st.mux.frames.Load(), st.mux.samples.Load(),
		time.Unix(0, st.mux.firstAU.Load()).Sub(t0))
}
