package hls

import "time"

// timeline turns one source's RTP timestamps into the stream's
// presentation times (at the source's rate, counted from the stream's
// epoch), which only grow. A source's first packet, or one of a new SSRC
// (a new ffmpeg child) or after a jump of more than a second (a restarted
// mixer, a paused camera), starts a run at the wall clock's time, after
// what went before; within a run the source's own spacing holds, so the
// audio (the mix) and the video (the child's H.264) stay on one time
// line. A run that starts late (a child's first frames come in a burst
// after it probed its input) is ahead of the wall clock: its steps are
// shortened by a tenth until it is back, so the video does not trail the
// audio by the child's start-up. It belongs to one goroutine.
type timeline struct {
	epoch time.Time
	rate  int64
	based bool
	ssrc  uint32
	src   uint32 // the last source timestamp
	last  int64  // and the time it went out as
}

func newTimeline(epoch time.Time, rate int64) *timeline {
	return &timeline{epoch: epoch, rate: rate}
}

// at is the presentation time of a packet of ssrc with timestamp ts that
// arrived at now; false for one to drop (not after the last).
func (tl *timeline) at(ssrc, ts uint32, now time.Time) (int64, bool) {
	wall := int64(now.Sub(tl.epoch)) / 1000 * tl.rate / 1_000_000
	d := int64(int32(ts - tl.src))
	if !tl.based || ssrc != tl.ssrc || d > tl.rate || d < -tl.rate {
		p := wall
		if tl.based && p <= tl.last {
			p = tl.last + tl.rate/50 // a frame's time after the last
		}
		tl.based, tl.ssrc, tl.src, tl.last = true, ssrc, ts, p
		return p, true
	}
	if d <= 0 {
		return 0, false
	}
	p := tl.last + d
	switch ahead := p - wall; {
	case ahead < -tl.rate:
		p = wall // the source fell a second behind: catch up
	case ahead > tl.rate/50:
		p -= min(d/10, ahead)
	}
	tl.src, tl.last = ts, p
	return p, true
}
