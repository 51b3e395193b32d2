package brokerbench

import (
	"context"

	"github.com/convene/convene/internal/bench/loadgen"
)

// Meeting is one meeting of a point: one speaker and some listeners.
type Meeting struct {
	Kind      loadgen.Kind
	Listeners int
}

// Setup is a point made ready on a system: speakers to drive, listeners
// that measure, and how to take it down.
type Setup struct {
	Speakers  []*loadgen.Speaker
	Listeners []*loadgen.Listener // in subscription order, meeting by meeting
	Close     func()
}

// System is a broker under test.
type System interface {
	Name() string
	// Prepare attaches the meetings' speakers and listeners.
	Prepare(ctx context.Context, meetings []Meeting, clock *loadgen.Clock) (*Setup, error)
	// Stop ends the system's process.
	Stop()
}

// newListeners makes the listener records of a plan, in subscription order.
func newListeners(meetings []Meeting) []*loadgen.Listener {
	var ls []*loadgen.Listener
	for m, mt := range meetings {
		for i := 0; i < mt.Listeners; i++ {
			ls = append(ls, &loadgen.Listener{Meeting: m, Kind: mt.Kind, Index: i})
		}
	}
	return ls
}

// newStream returns the stream of meeting m.
func newStream(k loadgen.Kind, m int) loadgen.Stream {
	if k == loadgen.Video {
		return loadgen.NewVideo(uint64(m + 1))
	}
	return loadgen.NewAudio()
}
