package mediabench

import (
	"time"

	"github.com/convene/convene/internal/bench/results"
)

// LateAfter is how much later than its place on the grid of its RTP
// timestamps a composite's frame may arrive and still be on time: one and
// a half frame intervals at 15 fps, what a receiver's one-frame jitter
// buffer absorbs.
const LateAfter = 100 * time.Millisecond

// reanchorAfter is how far a frame may stray from the grid before the
// grid is taken to have restarted (a new child's timestamps), not the
// frame to be late.
const reanchorAfter = 2 * time.Second

// FrameClock times one video stream's frames against their RTP
// timestamps (90 kHz). A frame (the packet with the marker bit) with
// timestamp ts is due at anchor + (ts - ts0)/90 kHz, where ts0 is the
// first timestamp heard and anchor the earliest arrival so far relative to
// its timestamp. A frame is late when it arrives more than LateAfter after
// it is due: an encoder that falls behind its input makes every later
// frame later, and they count late. Frames missing from the window show as
// fewer received than its length asks for. The goroutine that reads the
// stream owns it.
type FrameClock struct {
	started    bool
	ts0        uint32
	anchor     int64 // ns
	Received   uint64
	Late       uint64
	MaxLate    time.Duration
	Reanchored int
}

// Frame records a frame with timestamp ts that arrived at atNs (ns on
// the reader's clock); inWindow says whether it counts.
func (c *FrameClock) Frame(ts uint32, atNs int64, inWindow bool) {
	if !c.started {
		c.started, c.ts0, c.anchor = true, ts, atNs
	}
	rel := int64(int32(ts-c.ts0)) * int64(time.Second) / 90000
	transit := atNs - rel
	if d := transit - c.anchor; d > int64(reanchorAfter) || d < -int64(reanchorAfter) {
		c.ts0, c.anchor, transit = ts, atNs, atNs
		c.Reanchored++
	}
	if transit < c.anchor {
		c.anchor = transit
	}
	if !inWindow {
		return
	}
	c.Received++
	late := time.Duration(transit - c.anchor)
	if late > LateAfter {
		c.Late++
	}
	c.MaxLate = max(c.MaxLate, late)
}

// Frames is what the receivers of a step measured together.
type Frames struct {
	Streams  int    `json:"streams"`
	Expected uint64 `json:"expected"` // streams × window × fps
	Received uint64 `json:"received"`
	Late     uint64 `json:"late"`
	// Starved counts streams that got under Bar.StarvedBelow of theirs.
	Starved int `json:"starved"`
	// LateMax is the latest any frame arrived after it was due, ms.
	LateMax float64 `json:"late_max_ms"`
}

// Bar is what a step of composites must reach: every frame, or nearly,
// received and on time, and no composite left far behind.
var Bar = struct {
	MinReceived  float64 // share of the expected frames received, all streams together
	MaxLate      float64 // share of the received frames late
	StarvedBelow float64 // a stream under this share of its frames is starved; none may be
}{MinReceived: 0.995, MaxLate: 0.005, StarvedBelow: 0.95}

// SumFrames adds up the clocks of a window of length window at fps.
func SumFrames(cs []FrameClock, window time.Duration, fps int) Frames {
	f := Frames{Streams: len(cs)}
	per := uint64(window.Seconds()*float64(fps) + 0.5)
	for _, c := range cs {
		f.Expected += per
		f.Received += min(c.Received, per)
		f.Late += c.Late
		if float64(c.Received) < Bar.StarvedBelow*float64(per) {
			f.Starved++
		}
		f.LateMax = max(f.LateMax, float64(c.MaxLate)/1e6)
	}
	return f
}

// ReceivedShare is the share of the expected frames received.
func (f Frames) ReceivedShare() float64 { return results.Share(f.Received, f.Expected) }

// LateShare is the share of the received frames that were late.
func (f Frames) LateShare() float64 { return results.Share(f.Late, f.Received) }

// Pass says whether the step reached the bar.
func (f Frames) Pass() bool {
	return f.Streams > 0 && f.ReceivedShare() >= Bar.MinReceived && f.LateShare() <= Bar.MaxLate && f.Starved == 0
}
