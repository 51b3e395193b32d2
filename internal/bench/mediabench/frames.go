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
// frame later, and they count late. The frames due in a window are those
// its received frames' timestamps span (Span), so a frame missing between
// two is missed whatever the window's edges cut; a stream that stops
// altogether shows as too few arrivals (Bar.StarvedBelow). The goroutine
// that reads the stream owns it.
type FrameClock struct {
	started    bool
	ts0        uint32
	anchor     int64 // ns
	Received   uint64
	Late       uint64
	MaxLate    time.Duration
	Reanchored int
	// Span is the 90 kHz ticks the window's frames' timestamps cover, a
	// run of the grid at a time (a new child starts another), and Runs the
	// runs: Span/interval + Runs frames were due.
	Span int64
	Runs int
	// first and last are the current run's first and last timestamps in
	// the window, relative to ts0.
	first, last int64
	inRun       bool
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
		c.ts0, c.anchor, transit, rel = ts, atNs, atNs, 0
		c.Reanchored++
		c.endRun()
	}
	if transit < c.anchor {
		c.anchor = transit
	}
	if !inWindow {
		c.endRun()
		return
	}
	r := int64(int32(ts - c.ts0))
	if !c.inRun {
		c.first, c.last, c.inRun = r, r, true
		c.Runs++
	}
	c.first, c.last = min(c.first, r), max(c.last, r)
	c.Received++
	late := time.Duration(transit - c.anchor)
	if late > LateAfter {
		c.Late++
	}
	c.MaxLate = max(c.MaxLate, late)
}

// endRun adds the current run of the grid to Span.
func (c *FrameClock) endRun() {
	if c.inRun {
		c.Span += c.last - c.first
		c.inRun = false
	}
}

// Window returns what the window counted (the current run ended) and
// starts counting again, the grid kept.
func (c *FrameClock) Window() FrameClock {
	c.endRun()
	w := *c
	c.Received, c.Late, c.MaxLate, c.Span, c.Runs = 0, 0, 0, 0, 0
	return w
}

// Due is how many frames at fps the window's timestamps span.
func (c FrameClock) Due(fps int) uint64 {
	if c.Runs == 0 {
		return 0
	}
	return uint64(c.Span*int64(fps)/90000) + uint64(c.Runs)
}

// Frames is what the receivers of a step measured together.
type Frames struct {
	Streams int `json:"streams"`
	// Expected is the frames the received ones' timestamps span, at fps.
	Expected uint64 `json:"expected"`
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
	MinReceived  float64 // share of the frames due received, all streams together
	MaxLate      float64 // share of the received frames late
	StarvedBelow float64 // a stream that got under this share of window × fps is starved; none may be
}{MinReceived: 0.995, MaxLate: 0.005, StarvedBelow: 0.95}

// SumFrames adds up the windows (FrameClock.Window) of length window of
// streams at fps.
func SumFrames(cs []FrameClock, window time.Duration, fps int) Frames {
	f := Frames{Streams: len(cs)}
	per := window.Seconds() * float64(fps)
	for _, c := range cs {
		due := c.Due(fps)
		f.Expected += due
		f.Received += min(c.Received, due)
		f.Late += c.Late
		if float64(c.Received) < Bar.StarvedBelow*per {
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
