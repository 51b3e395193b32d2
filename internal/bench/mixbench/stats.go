package mixbench

import (
	"time"

	"github.com/convene/convene/internal/bench/results"
)

// Frame is the mixers' frame interval.
const Frame = 20 * time.Millisecond

// LateAfter is how much later than its place on the 20 ms grid a frame may
// arrive and still count as on time.
const LateAfter = 40 * time.Millisecond

// reanchorAfter is how far a frame may stray from the grid before the grid
// is taken to have restarted (a new RTP timestamp base), not the frame to
// be late.
const reanchorAfter = time.Second

// receiver is what one member measured of the mix it receives. Only the
// reader goroutine of its socket writes it.
//
// The grid: the frame with RTP timestamp ts is due at
// anchor + (ts - ts0)/rate, where ts0 is the first timestamp heard and
// anchor the earliest arrival so far relative to its timestamp
// (min over frames of arrival - (ts - ts0)/rate, from the warm-up on). A
// frame is late when it arrives more than LateAfter after it is due. A
// server that falls behind its own clock (a missed tick, a slow timer)
// makes every later frame later, and counts them late.
type receiver struct {
	started     bool
	ts0         uint32
	anchor      int64 // ns, on the load's clock
	prevTransit int64
	jitter      float64 // RFC 3550 §6.4.1, in ns
	received    uint64  // frames in the window
	late        uint64  // of those, late
	maxLate     int64   // ns after due, the worst in the window
	rtcp        uint64
	reanchored  int
}

// observe records an RTP packet with timestamp ts that arrived at atNs;
// inWindow says whether it counts.
func (r *receiver) observe(ts uint32, rate int, atNs int64, inWindow bool) {
	if !r.started {
		r.started, r.ts0, r.anchor, r.prevTransit = true, ts, atNs, atNs
	}
	rel := int64(int32(ts-r.ts0)) * int64(time.Second) / int64(rate)
	transit := atNs - rel
	if d := transit - r.anchor; d > int64(reanchorAfter) || d < -int64(reanchorAfter) {
		// A new timestamp base: start the grid again from this frame.
		r.ts0, r.anchor, r.prevTransit, transit = ts, atNs, atNs, atNs
		r.reanchored++
	}
	if transit < r.anchor {
		r.anchor = transit
	}
	d := transit - r.prevTransit
	if d < 0 {
		d = -d
	}
	r.jitter += (float64(d) - r.jitter) / 16
	r.prevTransit = transit
	if !inWindow {
		return
	}
	r.received++
	if late := transit - r.anchor; late > int64(LateAfter) {
		r.late++
		r.maxLate = max(r.maxLate, late)
	} else if late > r.maxLate {
		r.maxLate = late
	}
}

// Quality is what every receiver of a step measured, together.
type Quality struct {
	Receivers int    `json:"receivers"`
	Expected  uint64 `json:"expected"` // frames: receivers × window / 20 ms
	Received  uint64 `json:"received"`
	Late      uint64 `json:"late"`
	// Starved counts receivers that got under StarvedBelow of their frames.
	Starved int `json:"starved"`
	// JitterMean and JitterMax are the receivers' RFC 3550 jitter, ms.
	JitterMean float64 `json:"jitter_mean_ms"`
	JitterMax  float64 `json:"jitter_max_ms"`
	// LateMax is the latest any frame arrived after it was due, ms.
	LateMax float64 `json:"late_max_ms"`
	// Reanchored counts timestamp jumps (a restarted mixer, say).
	Reanchored int `json:"reanchored,omitempty"`
}

// Bar is the quality a step must reach to count: every mixed frame, or
// nearly, received and on time.
var Bar = struct {
	MinReceived  float64 // share of the expected frames received, over all receivers
	MaxLate      float64 // share of the received frames late
	StarvedBelow float64 // a receiver under this share of its frames is starved; none may be
}{MinReceived: 0.995, MaxLate: 0.005, StarvedBelow: 0.95}

// quality sums the receivers over a window of length window.
func quality(rs []receiver, window time.Duration) Quality {
	q := Quality{Receivers: len(rs)}
	per := uint64(window / Frame)
	var jsum float64
	for i := range rs {
		r := &rs[i]
		q.Expected += per
		q.Received += min(r.received, per)
		q.Late += r.late
		if float64(r.received) < Bar.StarvedBelow*float64(per) {
			q.Starved++
		}
		j := r.jitter / 1e6
		jsum += j
		q.JitterMax = max(q.JitterMax, j)
		q.LateMax = max(q.LateMax, float64(r.maxLate)/1e6)
		q.Reanchored += r.reanchored
	}
	if len(rs) > 0 {
		q.JitterMean = jsum / float64(len(rs))
	}
	return q
}

// ReceivedShare is the share of the expected frames received.
func (q Quality) ReceivedShare() float64 { return results.Share(q.Received, q.Expected) }

// LateShare is the share of the received frames that were late.
func (q Quality) LateShare() float64 { return results.Share(q.Late, q.Received) }

// Pass says whether the step reached the bar.
func (q Quality) Pass() bool {
	return q.Receivers > 0 && q.ReceivedShare() >= Bar.MinReceived && q.LateShare() <= Bar.MaxLate && q.Starved == 0
}
