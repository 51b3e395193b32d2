package mixer

import (
	"testing"
	"time"
)

// TestOwed: a mixer woken late (its core busy with other processes, the
// ticker dropping what it could not deliver) makes the frames it owes, so
// its outputs get one frame per 20 ms with no hole and no shift of the
// frames after; one too far behind skips ahead (a gap in the timestamps,
// later frames in their place); an early wake-up makes nothing.
func TestOwed(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	// frames returns how many frames a wake-up at now makes and skips.
	frames := func(now, next time.Time) (made, skipped int) {
		for n := 0; ; n++ {
			tick, skip := owed(now, next, n)
			skipped += skip
			next = next.Add(time.Duration(skip) * frame)
			if !tick {
				return made, skipped
			}
			made++
			next = next.Add(frame)
		}
	}
	for _, c := range []struct {
		name        string
		late        time.Duration // now - next
		made, skips int
	}{
		{"on time", 0, 1, 0},
		{"a little late", 3 * ms, 1, 0},
		{"two ticks dropped", 45 * ms, 3, 0},
		{"due within half a frame", 52 * ms, 4, 0},
		{"early (a buffered tick after catching up)", -15 * ms, 0, 0},
		{"just early", -5 * ms, 1, 0},
		{"100 ms behind: five made", 85 * ms, 5, 0},
		{"a second behind: five made, the other 46 due skipped", 1000 * ms, 5, 46},
	} {
		made, skipped := frames(t0.Add(c.late), t0)
		if made != c.made || skipped != c.skips {
			t.Errorf("%s: made %d, skipped %d; want %d, %d", c.name, made, skipped, c.made, c.skips)
		}
	}
}
