package playback

import (
	"context"
	"time"
)

// Status is what a Playback reports about itself.
type Status struct {
	Playing    bool          `json:"playing"`
	Ended      bool          `json:"ended"`
	Position   time.Duration `json:"-"`
	PositionMS int64         `json:"position_ms"`
	DurationMS int64         `json:"duration_ms"`
	Speed      float64       `json:"speed"`
	Sent       uint64        `json:"packets_sent"`
}

// Playback runs a Player on a clock in a goroutine that owns it; its
// methods are safe for concurrent use. Once it stopped (Done), its methods
// do nothing and Status reports where it stopped.
type Playback struct {
	clock Clock
	req   chan func(*Player, time.Time)
	done  chan struct{}
	stop  context.CancelFunc
	final Status // written before done closes
}

// Start plays p from its position on clock, sending its packets through
// emit (from the Playback's goroutine), until its last packet, Stop, or
// the end of ctx. Start takes over p: it closes it when it stops.
func Start(ctx context.Context, p *Player, clock Clock, emit Emit) *Playback {
	ctx, cancel := context.WithCancel(ctx)
	pb := &Playback{clock: clock, req: make(chan func(*Player, time.Time)), done: make(chan struct{}), stop: cancel}
	go pb.run(ctx, p, emit)
	return pb
}

func (pb *Playback) run(ctx context.Context, p *Player, emit Emit) {
	defer close(pb.done)
	defer p.Close()
	defer func() { pb.final = stateOf(p, pb.clock.Now()) }()
	p.Play(pb.clock.Now())
	for {
		wait, done := p.Step(pb.clock.Now(), emit)
		if done {
			return
		}
		var timer <-chan time.Time
		if wait >= 0 {
			timer = pb.clock.After(wait)
		}
		select {
		case <-ctx.Done():
			return
		case f := <-pb.req:
			f(p, pb.clock.Now())
		case <-timer:
		}
	}
}

// do runs f on the player's goroutine; false if the playback stopped.
func (pb *Playback) do(f func(*Player, time.Time)) bool {
	ran := make(chan struct{})
	select {
	case pb.req <- func(p *Player, now time.Time) { f(p, now); close(ran) }:
		<-ran
		return true
	case <-pb.done:
		return false
	}
}

// Pause stops the clock; nothing is sent until Resume.
func (pb *Playback) Pause() { pb.do(func(p *Player, now time.Time) { p.Pause(now) }) }

// Resume plays on from where it paused.
func (pb *Playback) Resume() { pb.do(func(p *Player, now time.Time) { p.Play(now) }) }

// Seek moves to a position.
func (pb *Playback) Seek(to time.Duration) (err error) {
	pb.do(func(p *Player, now time.Time) { err = p.Seek(now, to) })
	return err
}

// SetSpeed changes the speed.
func (pb *Playback) SetSpeed(s float64) (err error) {
	pb.do(func(p *Player, now time.Time) { err = p.SetSpeed(now, s) })
	return err
}

// Status reports where the playback is.
func (pb *Playback) Status() (st Status) {
	if !pb.do(func(p *Player, now time.Time) { st = stateOf(p, now) }) {
		<-pb.done
		return pb.final
	}
	return st
}

func stateOf(p *Player, now time.Time) Status {
	st := Status{Playing: p.Playing(), Ended: p.Ended(), Position: p.Position(now), Speed: p.Speed(),
		DurationMS: p.Duration().Milliseconds()}
	st.PositionMS = st.Position.Milliseconds()
	for _, t := range p.Tracks {
		st.Sent += t.Sent
	}
	return st
}

// Stop stops the playback and waits for its goroutine.
func (pb *Playback) Stop() {
	pb.stop()
	<-pb.done
}

// Done is closed once the playback stopped.
func (pb *Playback) Done() <-chan struct{} { return pb.done }
