package session

import (
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/rtplink"
	"github.com/convene/convene/internal/testutil"
)

// fakeVT transcodes every camera (it only notes who it was asked for and
// who was stopped).
type fakeVT struct {
	mu      sync.Mutex
	running map[*broker.Track]bool
}

func (f *fakeVT) Needs(*broker.Track, string) (bool, bool) { return true, true }

func (f *fakeVT) Subscribe(_ *broker.Room, t *broker.Track, _ string, _ broker.Sink) (func(), error) {
	f.mu.Lock()
	f.running[t] = true
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.running, t)
		f.mu.Unlock()
	}, nil
}

func (f *fakeVT) only(t *broker.Track) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.running) == 1 && f.running[t]
}

// TestRecoderFollowsLayers: a receiving video link that names its codec
// gets one transcoder of a simulcast camera, of the layer the room hands
// it; when that changes to another layer, the old layer's transcoder
// stops (before, both ran on, each sending the link its pictures).
func TestRecoderFollowsLayers(t *testing.T) {
	socks := testSockets(t)
	room := broker.NewRoom("s")
	vt := &fakeVT{running: map[*broker.Track]bool{}}
	rc := &recoder{vt: vt, room: room, link: "phone", codec: "video/H264", log: slog.Default(), subs: map[*broker.Track]*recodeSub{}}
	l, err := rtplink.Open(rtplink.Config{ID: "phone", Kind: media.Video, Direction: media.RecvOnly,
		Remote: netip.MustParseAddrPort("127.0.0.1:47990"), Receive: rc, OnChange: rc.sync}, socks, room)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	rc.out.Store(l)
	var layers [2]*broker.Track
	for i := range layers {
		if layers[i], err = room.Join(broker.Member{ID: []string{"a-l", "a-m"}[i], Kind: media.Video, Sends: true, Owner: "ada",
			Info: broker.TrackInfo{Codec: "video/VP8", Stream: "ada-camera", Layer: i + 1}}); err != nil {
			t.Fatal(err)
		}
	}
	key := func(tr *broker.Track) { // a VP8 keyframe's first packet
		p := media.NewPacket()
		copy(p.Buffer(), []byte{0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9, 0x10, 0x00})
		p.SetLen(20)
		tr.Publish(p)
	}
	key(layers[0])
	testutil.WaitFor(t, 5*time.Second, "the low layer transcoded", func() bool { return vt.only(layers[0]) })
	key(layers[1])
	key(layers[0])
	testutil.WaitFor(t, 5*time.Second, "the middle layer transcoded, and the low one no more", func() bool { return vt.only(layers[1]) })
}
