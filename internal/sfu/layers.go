package sfu

import (
	"time"

	"github.com/pion/interceptor/pkg/cc"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/media"
)

type ccEstimator = cc.BandwidthEstimator

// audioReserve is what the chooser keeps of a subscriber's estimate for
// each audio track before it gives the rest to video.
const audioReserve = 64_000

// choose picks the input a downTrack forwards: a fixed layer if the
// subscriber chose one, else the one the estimate affords (chooseAll).
// For a WHEP viewer's tracks it first picks the source: the pinned member's,
// else the loudest speaker's, else the first.
func (p *Peer) choose(d *downTrack) {
	ins := d.candidates()
	if len(ins) == 0 {
		return
	}
	var t *broker.Track
	if d.kind == media.Video && p.s.level() >= capacity.LowestLayer {
		t = ins[0] // the node sheds: every video at its lowest layer
	} else if m := int(d.manual.Load()); m > 0 {
		t = ins[0]
		for _, x := range ins {
			if x.Info().Layer <= m || x.Info().Layer == 0 {
				t = x
			}
		}
	} else {
		t = ins[0]
		if d.kind == media.Audio || len(ins) == 1 {
			t = ins[len(ins)-1]
		} else if c := d.target.Load(); c != nil && contains(ins, c) {
			t = c // the estimate moves it (chooseAll)
		} else if p.est.Load() != nil {
			// Start low: its keyframe is the smallest, so the first
			// frame shows soonest; the estimate raises it (GCC starts at
			// 1 Mbit/s: the middle layer, usually before the connection
			// is up).
			t = ins[0]
		} else {
			t = ins[len(ins)-1] // no estimate to raise it: the best
		}
	}
	d.setTarget(t)
}

func contains(ts []*broker.Track, t *broker.Track) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// candidates are the inputs the downTrack may forward: all of them for a
// browser's (they are one source's layers), one source's for a WHEP
// viewer's; of those, the layers heard within broker.Recent, so that a
// layer the publisher stopped sending (or never sent: the top layer of
// a small camera) is not chosen, its measured rate of 0 fitting any
// estimate.
func (d *downTrack) candidates() []*broker.Track {
	in := d.inputs.Load()
	if in == nil {
		return nil
	}
	ins := *in
	if d.p.mode != modeWHEP || len(ins) == 0 {
		return broker.HeardOf(ins, time.Now())
	}
	want := d.p.pin
	if want == "" && d.p.room != nil {
		want = d.p.room.speakers.loudest()
	}
	pick := streamOf(ins[0])
	for _, t := range ins {
		if want != "" && memberOf(t) == want {
			pick = streamOf(t)
			break
		}
	}
	var out []*broker.Track
	for _, t := range ins {
		if streamOf(t) == pick {
			out = append(out, t)
		}
	}
	return broker.HeardOf(out, time.Now())
}

func (d *downTrack) setTarget(t *broker.Track) {
	if old := d.target.Swap(t); old != t && d.kind == media.Video && d.cur.Load() != nil {
		t.RequestKeyframe()
	}
}

// chooseAll shares a subscriber's bandwidth estimate among its video
// tracks that are not fixed by hand: each gets the highest layer that fits
// what is left, at least its lowest. A layer goes up only when it fits
// with 20% to spare, so the choice does not flap.
func (p *Peer) chooseAll() {
	ep := p.est.Load()
	routes := *p.routes.Load()
	seen := map[*downTrack]bool{}
	var videos []*downTrack
	audio := 0
	for _, d := range routes {
		if seen[d] {
			continue
		}
		seen[d] = true
		if d.kind == media.Audio {
			audio++
			if p.mode == modeWHEP {
				p.choose(d)
			}
			continue
		}
		videos = append(videos, d)
	}
	if ep == nil || p.s.level() >= capacity.LowestLayer {
		for _, d := range videos {
			p.choose(d)
		}
		return
	}
	budget := (*ep).GetTargetBitrate() - audio*audioReserve
	p.s.m.estimate.Observe(float64((*ep).GetTargetBitrate()))
	for _, d := range videos {
		ins := d.candidates()
		if len(ins) <= 1 || d.manual.Load() != 0 {
			p.choose(d)
			if len(ins) == 1 {
				budget -= int(p.room.bitrateOf(ins[0]))
			}
			continue
		}
		cur := d.target.Load()
		pick := ins[0]
		for _, t := range ins {
			need := int(p.room.bitrateOf(t))
			if cur == nil || t.Info().Layer > cur.Info().Layer {
				need = need * 12 / 10
			}
			if need <= budget {
				pick = t
			}
		}
		budget -= int(p.room.bitrateOf(pick))
		d.setTarget(pick)
	}
}

// rate is a track's measured bit rate, from the broker's byte counters,
// kept by its room's tick goroutine (room.rates).
type rate struct {
	bytes uint64
	at    time.Time
	bps   uint64
}

// measure updates the rates of the tracks a room's subscribers forward now
// and forgets the others; tick goroutine only.
func (r *room) measure(tracks map[*broker.Track]bool, now time.Time) {
	next := make(map[*broker.Track]*rate, len(tracks))
	for t := range tracks {
		_, b := t.Stats()
		x := r.rates[t]
		if x == nil {
			x = &rate{bytes: b, at: now}
		} else if dt := now.Sub(x.at).Seconds(); dt >= 0.4 {
			cur := float64(b-x.bytes) * 8 / dt
			x.bps = uint64(float64(x.bps) + (cur-float64(x.bps))/2)
			x.bytes, x.at = b, now
		}
		next[t] = x
	}
	r.rates = next
}

// bitrateOf is a track's measured bit rate, bit/s; tick goroutine only.
func (r *room) bitrateOf(t *broker.Track) uint64 {
	if x := r.rates[t]; x != nil {
		return x.bps
	}
	return 0
}
