package hls

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/mixer"
	"github.com/convene/convene/internal/testutil"
)

// TestStreamShowsHighestLayer: of a simulcast camera that sends its two
// lower layers and never its top (primary) one, the stream shows the
// middle layer, and the low one once the middle one has been silent for
// broker.Recent. While the child (a stub) makes no frame, the camera is
// asked for keyframes again and again.
func TestStreamShowsHighestLayer(t *testing.T) {
	b := broker.New()
	room := b.Open("s_1")
	var asks [3]atomic.Int32
	var layers [3]*broker.Track
	for i, id := range []string{"a-h", "a-l", "a-m"} { // the top layer's ID sorts first
		layer := []int{3, 1, 2}[i]
		tr, err := room.Join(broker.Member{ID: id, Kind: media.Video, Sends: true, Owner: "m_a",
			Keyframe: func() { asks[layer-1].Add(1) },
			Info:     broker.TrackInfo{Codec: "video/VP8", ClockRate: 90000, Stream: "m_a-camera", Layer: layer, Primary: layer == 3}})
		if err != nil {
			t.Fatal(err)
		}
		layers[layer-1] = tr
	}
	var middle atomic.Bool
	middle.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the browser: the low layer, and the middle one while it may
		for ctx.Err() == nil {
			for i, tr := range layers[:2] {
				if i == 1 && !middle.Load() {
					continue
				}
				pk := media.NewPacket()
				copy(pk.Buffer(), []byte{0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9, 0x10, 0x01})
				pk.SetLen(20)
				tr.Publish(pk)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	testutil.WaitFor(t, 5*time.Second, "both layers heard", func() bool {
		return room.Best(layers[0]) == layers[1]
	})
	svc := NewService(Options{Dir: t.TempDir(), FFmpeg: stubFFmpeg(t), Rooms: b.Room, Mixers: mixer.NewService(mixer.Options{})})
	defer svc.Close()
	info, _, err := svc.Start("s_1", StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Video != "a-m/video" {
		t.Errorf("shows %q, want the middle layer (a-m/video)", info.Video)
	}
	before := asks[1].Load()
	testutil.WaitFor(t, 10*time.Second, "the middle layer asked for keyframes again", func() bool {
		return asks[1].Load() >= before+2
	})

	middle.Store(false)
	testutil.WaitFor(t, 10*time.Second, "the low layer shown once the middle one is silent", func() bool {
		i, _ := svc.Get("s_1")
		return i.Video == "a-l/video"
	})
	if n := asks[2].Load(); n != 0 {
		t.Errorf("the top layer, never sent, was asked for %d keyframes", n)
	}
}
