package mediabench

import (
	"testing"
	"time"
)

const frameNs = int64(time.Second) / CameraFPS

// TestFrameClock: frames on the grid of their timestamps are on time
// however far the stream is from the reader's clock; an encoder falling
// behind makes every later frame late; a new child's timestamps start the
// grid again instead of counting late.
func TestFrameClock(t *testing.T) {
	var c FrameClock
	base := int64(5e9)
	ts := uint32(4e9) // wraps during the test
	for k := range 30 {
		jitter := int64(k%3) * int64(10*time.Millisecond)
		c.Frame(ts+uint32(k*frameTicks), base+int64(k)*frameNs+jitter, true)
	}
	if c.Received != 30 || c.Late != 0 || c.MaxLate > 25*time.Millisecond {
		t.Fatalf("steady: %+v", c)
	}
	if w := c.Window(); w.Due(CameraFPS) != 30 || w.Received != 30 || c.Received != 0 {
		t.Fatalf("the first window: due %d, %+v; after it %+v", w.Due(CameraFPS), w, c)
	}
	// Falling behind by 10 ms a frame: late once more than 100 ms behind.
	for k := 30; k < 60; k++ {
		c.Frame(ts+uint32(k*frameTicks), base+int64(k)*frameNs+int64(k-30)*int64(10*time.Millisecond), true)
	}
	if c.Late != 19 { // frames 41..59 are 110..290 ms behind
		t.Fatalf("behind: %d late, want 19 (%+v)", c.Late, c)
	}
	// A frame lost on the way (60) is missed: 61 and 62 span it.
	c.Frame(ts+61*frameTicks, base+61*frameNs+int64(31*10*time.Millisecond), true)
	if c.Received != 31 {
		t.Fatalf("after a lost frame: %+v", c)
	}
	// A restart: timestamps jump; the grid starts again, a new run.
	c.Frame(12345, base+62*frameNs, true)
	c.Frame(12345+frameTicks, base+63*frameNs, true)
	if c.Reanchored != 1 || c.Late != 20 { // frame 61 was 310 ms behind
		t.Fatalf("restart: %+v", c)
	}
	// Outside the window nothing counts, but the grid moves on.
	c.Frame(12345+2*frameTicks, base+64*frameNs+int64(time.Second), false)
	w := c.Window()
	if w.Received != 33 || w.Runs != 2 || w.Due(CameraFPS) != 34 { // 30..61 (32 due, 31 got) and 2 after the restart
		t.Fatalf("the second window: due %d, %+v", w.Due(CameraFPS), w)
	}
}

func TestSumFrames(t *testing.T) {
	w := 4 * time.Second // 60 frames at 15 fps
	run := func(received, spanned int) FrameClock {
		return FrameClock{Received: uint64(received), Span: int64(spanned-1) * frameTicks, Runs: 1}
	}
	ok := run(60, 60)
	for _, c := range []struct {
		name   string
		clocks []FrameClock
		pass   bool
	}{
		{"all on time", []FrameClock{ok, ok}, true},
		{"the window's edges cut one", []FrameClock{ok, run(59, 59)}, true},
		{"none", nil, false},
		{"one late frame in 120", []FrameClock{ok, {Received: 60, Late: 1, Span: 59 * frameTicks, Runs: 1}}, false},
		{"one missing of 120 (99.2%)", []FrameClock{ok, run(59, 60)}, false},
		{"one missing of 240 (99.6%)", []FrameClock{ok, ok, ok, run(59, 60)}, true},
		{"a stream that stopped", []FrameClock{ok, run(50, 50)}, false},
		{"more than due does not make up for another's missing", []FrameClock{run(61, 60), run(59, 60)}, false},
	} {
		if f := SumFrames(c.clocks, w, CameraFPS); f.Pass() != c.pass {
			t.Errorf("%s: pass %v, want %v (%+v)", c.name, f.Pass(), c.pass, f)
		}
	}
}

// TestVideoFrame: the player sends 15 frames in each 50 ticks of 20 ms.
func TestVideoFrame(t *testing.T) {
	if videoFrame(-1) != 0 || videoFrame(0) != 1 {
		t.Fatalf("start: %d %d", videoFrame(-1), videoFrame(0))
	}
	sent := 0
	for tick := range 500 {
		n := videoFrame(tick) - videoFrame(tick-1)
		if n < 0 || n > 1 {
			t.Fatalf("tick %d sends %d frames", tick, n)
		}
		sent += n
		// Frame k is never sent before its time k/15 s.
		if due := float64(videoFrame(tick)-1) / CameraFPS; due > float64(tick)*0.02+1e-9 {
			t.Fatalf("tick %d (%.2f s) sends frame due at %.3f s", tick, float64(tick)*0.02, due)
		}
	}
	if sent != 150 {
		t.Errorf("%d frames in 10 s, want 150", sent)
	}
}
