package hls

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/mixer"
	tu "github.com/convene/convene/internal/testutil"
)

// TestCardLL: a session without a camera streams the card (real ffmpeg)
// and the mix as LL-HLS: a multivariant playlist with the video and an
// Opus audio rendition, media playlists with parts that can block;
// segments answered whole with their length, playlists never stale.
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
	// Answers are kept, never stale: a segment comes whole, with its
	// length, the same each time; a later playlist shows more.
	var seg string
	deadline := time.Now().Add(15 * time.Second)
	for seg == "" && time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		_, _, pl = fetch(t, srv.URL+"/hls/s_1/video1_stream.m3u8")
		for _, l := range strings.Split(pl, "\n") {
			if strings.HasSuffix(l, ".mp4") && strings.Contains(l, "_seg") && !strings.HasPrefix(l, "#") {
				seg = l
				break
			}
		}
	}
	if seg == "" {
		t.Fatalf("no segment listed:\n%s", pl)
	}
	code1, h1, b1 := fetch(t, srv.URL+"/hls/s_1/"+seg)
	code2, h2, b2 := fetch(t, srv.URL+"/hls/s_1/"+seg)
	if code1 != 200 || code2 != 200 || b1 != b2 || len(b1) == 0 || h1.Get("Content-Length") != strconv.Itoa(len(b1)) ||
		h2.Get("Content-Length") != strconv.Itoa(len(b2)) || !strings.Contains(h2.Get("Cache-Control"), "private") {
		t.Errorf("a segment twice: %d %d, %d and %d bytes, lengths %q %q, Cache-Control %q", code1, code2, len(b1), len(b2),
			h1.Get("Content-Length"), h2.Get("Content-Length"), h2.Get("Cache-Control"))
	}
	time.Sleep(1200 * time.Millisecond)
	if _, h, later := fetch(t, srv.URL+"/hls/s_1/video1_stream.m3u8"); later == pl || h.Get("Cache-Control") != "no-cache, private" {
		t.Errorf("the playlist 1.2 s later is the same (Cache-Control %q):\n%s", h.Get("Cache-Control"), later)
	}
	svc.mu.Lock()
	st := svc.streams["s_1"]
	svc.mu.Unlock()
	t.Logf("frames %d, audio packets %d, first frame %v after the start", st.mux.frames.Load(), st.mux.samples.Load(),
		time.Unix(0, st.mux.firstAU.Load()).Sub(t0))
}

// TestSilentCameraShowsCard: a camera that sends only frames ffmpeg
// cannot decode (no keyframe ever) would stall the stream, the mix too;
// after Stall the child shows the card, and the muxer gets frames.
func TestSilentCameraShowsCard(t *testing.T) {
	ff := tu.NeedBinary(t, "ffmpeg")
	b := broker.New()
	room := b.Open("s_1")
	tr, err := room.Join(broker.Member{ID: "cam", Kind: media.Video, Sends: true, Owner: "m_a",
		Info: broker.TrackInfo{Codec: "video/VP8", ClockRate: 90000}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // VP8 interframes, never a keyframe
		for seq := uint16(1); ctx.Err() == nil; seq++ {
			pk := media.NewPacket()
			copy(pk.Buffer(), []byte{0x80, 96, byte(seq >> 8), byte(seq), 0, 0, byte(seq >> 8), byte(seq), 0, 0, 0, 9, 0x10, 0x01, 0x01, 0x02})
			pk.SetLen(20)
			tr.Publish(pk)
			time.Sleep(66 * time.Millisecond)
		}
	}()
	svc := NewService(Options{Dir: t.TempDir(), FFmpeg: ff, Rooms: b.Room, Mixers: mixer.NewService(mixer.Options{})})
	defer svc.Close()
	t0 := time.Now()
	if _, _, err := svc.Start("s_1", StartOptions{}); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	st := svc.streams["s_1"]
	svc.mu.Unlock()
	tu.WaitFor(t, Stall+8*time.Second, "the card's frames", func() bool { return st.mux.frames.Load() > 10 })
	st.mu.Lock()
	card := st.childCard
	st.mu.Unlock()
	if !card {
		t.Error("frames, but not from the card")
	}
	t.Logf("the card's frames %v after the start", time.Since(t0).Round(time.Millisecond))
	srv := serveStreams(svc)
	defer srv.Close()
	if code, _, pl := fetch(t, srv.URL+"/hls/s_1/video1_stream.m3u8"); code != 200 || !strings.Contains(pl, "#EXT-X-PART:") {
		t.Errorf("the media playlist: %d\n%s", code, pl)
	}
}
