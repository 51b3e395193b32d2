package brokerbench

import (
	"context"
	"errors"

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

// ErrRefused is a join the system refused by its admission; other join
// errors are failures.
var ErrRefused = errors.New("join refused")

// Joiner is a System whose listeners can join one by one while its
// speakers send (the overload mode).
type Joiner interface {
	System
	// PrepareJoins attaches the meetings' speakers and makes every
	// listener ready; join(i) subscribes Setup.Listeners[i]. join may be
	// called from several goroutines.
	PrepareJoins(ctx context.Context, meetings []Meeting, clock *loadgen.Clock) (*Setup, func(ctx context.Context, i int) error, error)
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
