package session

import (
	"encoding/binary"
	"log/slog"
	"net"
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

// switchVT "transcodes" a camera into H.264: a track of its own (minted
// in a room of its own) that sends the out sink an IDR first, then other
// frames, every 20 ms with its own SSRC and numbers, until stopped.
type switchVT struct{ minted *broker.Room }

func (v *switchVT) Needs(*broker.Track, string) (bool, bool) { return true, true }

func (v *switchVT) Subscribe(_ *broker.Room, t *broker.Track, _ string, out broker.Sink) (func(), error) {
	tr, err := v.minted.Join(broker.Member{ID: t.ID() + "-h264", Kind: media.Video, Sends: true})
	if err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	go func() {
		ssrc, seq, ts := uint32(t.ID()[0])*7919, uint16(t.ID()[0])*100, uint32(t.ID()[0])*100000 // each camera its own
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			nal := byte(0x41) // a non-IDR slice
			if i == 0 {
				nal = 0x65 // an IDR slice
			}
			p := media.NewPacket()
			w := p.Buffer()[:16]
			copy(w, []byte{0x80, 0xe4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, nal, 1, 2, 3})
			w[2], w[3] = byte(seq>>8), byte(seq)
			w[4], w[5], w[6], w[7] = byte(ts>>24), byte(ts>>16), byte(ts>>8), byte(ts)
			w[8], w[9], w[10], w[11] = byte(ssrc>>24), byte(ssrc>>16), byte(ssrc>>8), byte(ssrc)
			p.SetLen(16)
			p.Kind = media.Video
			out.Deliver(p, tr)
			seq++
			ts += 1800
		}
	}()
	return func() { close(stop); v.minted.Leave(tr.ID()) }, nil
}

// TestRecoderJoinsTranscodedCameras: a link that takes what it hears as
// one stream (a video phone following the speaker) and needs every camera
// transcoded gets, across a change of camera (Room.SetFrom), one SSRC and
// sequence numbers that run on by one: each camera's transcoder is a
// source of its own, which the link's endpoint (ffmpeg's RTP demuxer)
// would otherwise take for a new stream whose numbers jump.
func TestRecoderJoinsTranscodedCameras(t *testing.T) {
	socks := testSockets(t)
	room := broker.NewRoom("s")
	vt := &switchVT{minted: broker.NewRoom("vt")}
	phone, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { phone.Close() })
	rc := &recoder{vt: vt, room: room, link: "phone", codec: "video/H264", log: slog.Default(), subs: map[*broker.Track]*recodeSub{}}
	l, err := rtplink.Open(rtplink.Config{ID: "phone", Kind: media.Video, Direction: media.RecvOnly, From: "ada", OneStream: true,
		Remote: phone.LocalAddr().(*net.UDPAddr).AddrPort(), Receive: rc, OnChange: rc.sync}, socks, room)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	rc.open(l, true)
	cams := map[string]*broker.Track{}
	for _, who := range []string{"ada", "bob"} {
		if cams[who], err = room.Join(broker.Member{ID: who + "-cam", Kind: media.Video, Sends: true, Owner: who,
			Info: broker.TrackInfo{Codec: "video/VP8"}}); err != nil {
			t.Fatal(err)
		}
	}
	key := func(tr *broker.Track) { // a VP8 keyframe's first packet
		p := media.NewPacket()
		copy(p.Buffer(), []byte{0x80, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9, 0x10, 0x00, 0x00, 0x00, 0x9d, 0x01, 0x2a, 2, 0, 2, 0})
		p.SetLen(23)
		tr.Publish(p)
	}
	type got struct {
		ssrc uint32
		seq  uint16
	}
	var mu sync.Mutex
	var pks []got
	go func() {
		buf := make([]byte, 1500)
		for {
			n, err := phone.Read(buf)
			if err != nil {
				return
			}
			if n >= 12 {
				mu.Lock()
				pks = append(pks, got{binary.BigEndian.Uint32(buf[8:]), binary.BigEndian.Uint16(buf[2:])})
				mu.Unlock()
			}
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(pks) }
	key(cams["ada"])
	testutil.WaitFor(t, 5*time.Second, "ada's camera at the phone", func() bool { return count() >= 10 })
	room.SetFrom("phone", "bob")
	before := count()
	testutil.WaitFor(t, 5*time.Second, "bob's camera at the phone", func() bool {
		key(cams["bob"])
		return count() >= before+10
	})
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(pks); i++ {
		if pks[i].ssrc != pks[0].ssrc || pks[i].seq != pks[i-1].seq+1 {
			t.Fatalf("packet %d of %d: SSRC %d seq %d after %d (first SSRC %d): not one stream", i, len(pks), pks[i].ssrc, pks[i].seq, pks[i-1].seq, pks[0].ssrc)
		}
	}
	t.Logf("%d packets, one SSRC, numbers by one across the change of camera", len(pks))
}
