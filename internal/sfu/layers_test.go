package sfu

import (
	"testing"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/media"
)

// TestChooseHeardLayers: of a simulcast camera that sends its two lower
// layers and not its top one (Chromium from a 640×360 camera), a
// subscriber without an estimate, and one that asked for the top layer
// by hand, get the middle one: the top one's measured rate of 0 must not
// make it the choice.
func TestChooseHeardLayers(t *testing.T) {
	s := &SFU{cfg: Config{Shed: func() capacity.Level { return capacity.Normal }}}
	p := &Peer{s: s, room: &room{speakers: newSpeakers("s", nil, nil)}}
	layers := cameraLayers(t, 2)
	for _, manual := range []int32{0, 3} {
		d := &downTrack{p: p, kind: media.Video}
		d.inputs.Store(&layers)
		d.manual.Store(manual)
		p.choose(d)
		if got := d.target.Load().Info().Layer; got != 2 {
			t.Errorf("layer asked for %d: the choice is layer %d, want 2 (the top one is never sent)", manual, got)
		}
	}
}

// TestChooseStartsLowWithAnEstimate: a subscriber with a bandwidth
// estimate starts on a camera's lowest layer (the smallest keyframe: the
// first frame soonest) and the estimate raises it; one without an
// estimate, which nothing would raise, gets the highest heard.
func TestChooseStartsLowWithAnEstimate(t *testing.T) {
	s := &SFU{cfg: Config{Shed: func() capacity.Level { return capacity.Normal }}}
	layers := cameraLayers(t, 3)
	for _, c := range []struct {
		estimate bool
		want     int
	}{{true, 1}, {false, 3}} {
		p := &Peer{s: s, room: &room{speakers: newSpeakers("s", nil, nil)}}
		if c.estimate {
			var e ccEstimator
			p.est.Store(&e)
		}
		d := &downTrack{p: p, kind: media.Video}
		d.inputs.Store(&layers)
		p.choose(d)
		if got := d.target.Load().Info().Layer; got != c.want {
			t.Errorf("estimate %v: starts on layer %d, want %d", c.estimate, got, c.want)
		}
	}
}

// cameraLayers are a simulcast camera's three layers in a room, of which
// the lowest heard have sent a packet.
func cameraLayers(t *testing.T, heard int) []*broker.Track {
	t.Helper()
	br := broker.New().Open("s")
	var layers []*broker.Track
	for l := 1; l <= 3; l++ {
		tr, err := br.Join(broker.Member{ID: "cam" + string(rune('0'+l)), Owner: "ada", Kind: media.Video, Sends: true,
			Info: broker.TrackInfo{Codec: "video/VP8", Layer: l, Stream: "ada-cam", Primary: l == 3}})
		if err != nil {
			t.Fatal(err)
		}
		if l <= heard {
			pk := media.NewPacket()
			pk.SetLen(12)
			tr.Publish(pk)
		}
		layers = append(layers, tr)
	}
	return layers
}
