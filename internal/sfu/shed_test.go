package sfu

import (
	"testing"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/media"
)

// TestShedOrder: under an injected shed level a subscriber gets every
// video, then only the speakers', then none; audio at every level.
func TestShedOrder(t *testing.T) {
	var lvl capacity.Level
	s := &SFU{cfg: Config{Shed: func() capacity.Level { return lvl }}}
	r := &room{speakers: newSpeakers("s", nil, nil)}
	p := &Peer{s: s, room: r}
	br := broker.New().Open("s")
	track := func(owner string, k media.Kind) *broker.Track {
		tr, err := br.Join(broker.Member{ID: owner + k.String(), Owner: owner, Kind: k, Sends: true})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	speakerVideo, quietVideo, quietAudio := track("ada", media.Video), track("bob", media.Video), track("bob", media.Audio)
	r.speakers.video.Store(&map[string]bool{"ada": true}) // Ada speaks

	for _, c := range []struct {
		lvl                   capacity.Level
		speaker, quiet, audio bool // forwarded
	}{
		{capacity.Normal, true, true, true},
		{capacity.LowestLayer, true, true, true},
		{capacity.SpeakersVideo, true, false, true},
		{capacity.NoVideo, false, false, true},
		{capacity.Normal, true, true, true}, // restored
	} {
		lvl = c.lvl
		if got := !p.shed(media.Video, speakerVideo); got != c.speaker {
			t.Errorf("%v: the speaker's video forwarded %v, want %v", c.lvl, got, c.speaker)
		}
		if got := !p.shed(media.Video, quietVideo); got != c.quiet {
			t.Errorf("%v: a quiet member's video forwarded %v, want %v", c.lvl, got, c.quiet)
		}
		if got := !p.shed(media.Audio, quietAudio); got != c.audio {
			t.Errorf("%v: audio forwarded %v, want %v", c.lvl, got, c.audio)
		}
	}
}

// TestShedLowestLayer: from the first shed level on, a simulcast source
// is forwarded at its lowest layer, even one chosen by hand; back to
// normal, the choice is the subscriber's again.
func TestShedLowestLayer(t *testing.T) {
	var lvl capacity.Level
	s := &SFU{cfg: Config{Shed: func() capacity.Level { return lvl }}}
	p := &Peer{s: s, room: &room{speakers: newSpeakers("s", nil, nil)}}
	br := broker.New().Open("s")
	var layers []*broker.Track
	for l := 1; l <= 3; l++ {
		tr, err := br.Join(broker.Member{ID: "cam" + string(rune('0'+l)), Owner: "ada", Kind: media.Video, Sends: true,
			Info: broker.TrackInfo{Layer: l, Stream: "ada-cam"}})
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, tr)
	}
	d := &downTrack{p: p, kind: media.Video}
	d.inputs.Store(&layers)
	d.manual.Store(3)
	for _, c := range []struct {
		lvl  capacity.Level
		want int
	}{{capacity.Normal, 3}, {capacity.LowestLayer, 1}, {capacity.NoVideo, 1}, {capacity.Normal, 3}} {
		lvl = c.lvl
		p.choose(d)
		if got := d.target.Load().Info().Layer; got != c.want {
			t.Errorf("%v: layer %d, want %d", c.lvl, got, c.want)
		}
	}
}

// ForwardDelay gives the governor the forward delay histogram as counts
// by bucket, not cumulative, with one past the last bound.
func TestForwardDelayCounts(t *testing.T) {
	s := &SFU{m: newMetrics(nil)}
	for _, v := range []float64{0.0001, 0.0001, 0.003, 0.3, 2} {
		s.m.delay.Observe(v)
	}
	bounds, counts := s.ForwardDelay()
	if len(counts) != len(bounds)+1 {
		t.Fatalf("%d counts for %d bounds", len(counts), len(bounds))
	}
	want := map[float64]uint64{0.0005: 2, 0.005: 1, 0.5: 1}
	for i, b := range bounds {
		if counts[i] != want[b] {
			t.Errorf("within %v: %d, want %d", b, counts[i], want[b])
		}
	}
	if counts[len(bounds)] != 1 {
		t.Errorf("past every bound: %d, want 1", counts[len(bounds)])
	}
}
