package vtranscode

import (
	"errors"
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/ffmpeg"
	"github.com/convene/convene/internal/media"
)

// TestAdmission: a new transcoder is refused beyond Max, beyond Cores by
// the running ones' measured load plus one more's average, and when the
// governor refuses its packets; each refusal wraps
// capacity.ErrOverCapacity and is counted by its reason.
func TestAdmission(t *testing.T) {
	governor := error(nil)
	h := NewHub(Options{Dir: t.TempDir(), Max: 2, Cores: 1, Admit: func(string, float64) error { return governor }})
	room := broker.New().Open("r")
	src, err := room.Join(broker.Member{ID: "cam", Kind: media.Video, Sends: true, Info: broker.TrackInfo{Codec: VP8}})
	if err != nil {
		t.Fatal(err)
	}
	c := Target{Codec: H264, Width: 640, Height: 360, FPS: 15}
	if err := h.admitLocked(c); err != nil {
		t.Fatalf("the first transcoder: %v", err)
	}

	running := &Transcoder{}
	running.load.Store(600) // 0.6 cores measured
	h.byKey[key{src, c}] = running
	if err := h.admitLocked(c); !errors.Is(err, ErrCapacity) || !errors.Is(err, capacity.ErrOverCapacity) {
		t.Errorf("0.6 + 0.6 of 1 core: %v, want ErrCapacity", err)
	}
	running.load.Store(300)
	if err := h.admitLocked(c); err != nil {
		t.Errorf("0.3 + 0.3 of 1 core: %v", err)
	}
	governor = capacity.ErrOverCapacity
	if err := h.admitLocked(c); !errors.Is(err, capacity.ErrOverCapacity) {
		t.Errorf("the governor refuses: %v", err)
	}
	governor = nil
	h.byKey[key{src, Target{Codec: VP8, Width: 640, Height: 360, FPS: 15}}] = running
	if err := h.admitLocked(c); !errors.Is(err, ErrLimit) || !errors.Is(err, capacity.ErrOverCapacity) {
		t.Errorf("a third of max 2: %v, want ErrLimit", err)
	}
	for reason, want := range map[string]float64{"cpu": 1, "capacity": 1, "limit": 1} {
		if got := promtest.ToFloat64(h.o.Metrics.refused.WithLabelValues(reason)); got != want {
			t.Errorf("refused{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

// TestSubscribeRefusesOtherCodecs: only VP8 and H.264 are encoded, and
// only a source of a codec the node knows is taken.
func TestSubscribeRefusesOtherCodecs(t *testing.T) {
	h := NewHub(Options{Dir: t.TempDir()})
	room := broker.New().Open("r")
	av1, _ := room.Join(broker.Member{ID: "av1", Kind: media.Video, Sends: true, Info: broker.TrackInfo{Codec: "video/AV1"}})
	vp8, _ := room.Join(broker.Member{ID: "vp8", Kind: media.Video, Sends: true, Info: broker.TrackInfo{Codec: VP8}})
	sink := broker.SinkFunc(func(p *media.Packet, _ *broker.Track) { p.Release() })
	if _, err := h.Subscribe(room, vp8, Target{Codec: "video/AV1"}, sink); !errors.Is(err, ErrCodec) {
		t.Errorf("to AV1: %v, want ErrCodec", err)
	}
	if _, err := h.Subscribe(room, av1, Target{Codec: H264}, sink); !errors.Is(err, ErrCodec) {
		t.Errorf("from AV1: %v, want ErrCodec", err)
	}
	if h.Count() != 0 {
		t.Errorf("%d transcoders run", h.Count())
	}
}

// TestNeeds: a receiver needs a camera transcoded when its codec is known
// and another; a plain RTP camera that has sent counts as VP8.
func TestNeeds(t *testing.T) {
	room := broker.New().Open("r")
	h264, _ := room.Join(broker.Member{ID: "h", Kind: media.Video, Sends: true, Info: broker.TrackInfo{Codec: "video/h264"}})
	plain, _ := room.Join(broker.Member{ID: "p", Kind: media.Video, Sends: true})
	if needs, known := Needs(h264, "video/H264"); needs || !known {
		t.Errorf("H.264 to H.264: needs %v known %v", needs, known)
	}
	if needs, known := Needs(h264, VP8); !needs || !known {
		t.Errorf("H.264 to VP8: needs %v known %v", needs, known)
	}
	if _, known := Needs(plain, H264); known {
		t.Error("a plain camera's codec is known before it sent")
	}
	pk := media.NewPacket()
	b := pk.Buffer()
	b[0], b[1] = 0x80, 96
	pk.SetLen(12)
	plain.Publish(pk)
	if needs, known := Needs(plain, H264); !needs || !known {
		t.Errorf("a plain camera that sent, to H.264: needs %v known %v", needs, known)
	}
}

// TestIdleBeats: while the source sends nothing the transcoder's beats
// move by themselves (its child has nothing to report); once the source
// sends, only the child's own beats count.
func TestIdleBeats(t *testing.T) {
	room := broker.New().Open("r")
	src, _ := room.Join(broker.Member{ID: "cam", Kind: media.Video, Sends: true, Info: broker.TrackInfo{Codec: VP8}})
	tr := &Transcoder{src: src, proc: &ffmpeg.Proc{}}
	b0 := tr.status().Beats
	if b1 := tr.status().Beats; b1 <= b0 {
		t.Errorf("a silent source: beats %d then %d, want them to move", b0, b1)
	}
	send := func() {
		pk := media.NewPacket()
		b := pk.Buffer()
		b[0], b[1] = 0x80, 96
		pk.SetLen(12)
		src.Publish(pk)
	}
	send()
	b2 := tr.status().Beats
	send()
	if b3 := tr.status().Beats; b3 != b2 {
		t.Errorf("a sending source and a silent child: beats %d then %d, want them to stand", b2, b3)
	}
}
