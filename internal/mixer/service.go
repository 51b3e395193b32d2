package mixer

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/supervise"
)

// ErrCapacity is returned when the node runs as many mixers as it can.
var ErrCapacity = errors.New("mixer: the node's mixing capacity is used up")

// Options configure the node's mixers.
type Options struct {
	// Speakers is how many of the loudest inputs are mixed (K); 6.
	Speakers int
	// Depth is the jitter buffer's depth in 20 ms frames; 3.
	Depth int
	// Max is how many mixers the node runs at once; 0 means 200.
	Max int
	// Cores is the CPU the node's mixers may use, in cores; a new mixer
	// is refused when the mixers' measured load plus one more mixer's
	// would exceed it. 0 means 0.8 of GOMAXPROCS.
	Cores float64
	// Supervisor, if set, gets every mixer's liveness and load and
	// restarts a mixer that stops ticking; it also measures the load
	// Cores is checked against. Without it the load is summed here.
	Supervisor *supervise.Supervisor
	// OnSpeakers, if set, hears a group's active speakers (member IDs,
	// sorted) whenever they change; it runs on the mixer's goroutine and
	// must not block.
	OnSpeakers func(session, group string, speakers []string)

	Metrics *Metrics
	Logger  *slog.Logger
}

// Service holds the node's mixers, one per session subgroup with outputs.
type Service struct {
	o      Options
	mu     sync.Mutex
	groups map[key]*group
}

// group is one subgroup's mixer and the outputs it serves; the outputs
// are kept here too, so a hung mixer's own lock is never needed to
// replace it.
type group struct {
	m       *Mixer
	room    *broker.Room
	outs    map[string]Output
	unwatch func()
}

type key struct{ session, group string }

func (k key) String() string { return k.session + "/" + k.group }

// NewService returns a service with no mixers.
func NewService(o Options) *Service {
	if o.Speakers <= 0 {
		o.Speakers = 6
	}
	if o.Depth <= 0 {
		o.Depth = 3
	}
	if o.Max <= 0 {
		o.Max = 200
	}
	if o.Cores <= 0 {
		o.Cores = 0.8 * float64(runtime.GOMAXPROCS(0))
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{o: o, groups: map[key]*group{}}
}

// Attach makes out hear the mix of a session's group in room, starting
// the group's mixer if it has none. Detach with the returned function.
func (s *Service) Attach(session, grp string, room *broker.Room, out *Output) (detach func(), err error) {
	if out.Sink == nil || out.Codec.Rate == 0 {
		return nil, fmt.Errorf("mixer: output %s needs a sink and a codec", out.ID)
	}
	k := key{session, grp}
	s.mu.Lock()
	g := s.groups[k]
	if g == nil {
		if err := s.admit(); err != nil {
			s.mu.Unlock()
			s.o.Metrics.refused.Inc()
			return nil, err
		}
		m, err := newMixer("mixer:"+grp, session, grp, room, &s.o)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		g = &group{m: m, room: room, outs: map[string]Output{}}
		s.groups[k] = g
		s.o.Metrics.mixers.Inc()
		if s.o.Supervisor != nil {
			g.unwatch = s.o.Supervisor.Add("mixer", k.String(), func() supervise.Status { return s.status(k) },
				func() { s.restart(k) })
		}
	}
	g.outs[out.ID] = Output{ID: out.ID, Owner: out.Owner, Codec: out.Codec, Sink: out.Sink}
	m := g.m
	s.mu.Unlock()
	// If the mixer is replaced meanwhile, its successor has the output
	// already (from g.outs) and this one is abandoned.
	m.add(out)
	var once sync.Once
	return func() { once.Do(func() { s.detach(k, out.ID) }) }, nil
}

// Free is how many more mixers the node would start now: 0 when it would
// refuse one (mixer.max, or the mixers' measured load past mixer.cores).
func (s *Service) Free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admit() != nil {
		return 0
	}
	return s.o.Max - len(s.groups)
}

// admit refuses a new mixer beyond Max or beyond the measured capacity
// (under mu).
func (s *Service) admit() error {
	n := len(s.groups)
	if n >= s.o.Max {
		return fmt.Errorf("%w (%d mixers, mixer.max)", ErrCapacity, n)
	}
	load := 0.0
	if s.o.Supervisor != nil {
		load = s.o.Supervisor.Load("mixer")
	} else {
		for _, g := range s.groups {
			load += g.m.Load()
		}
	}
	if n > 0 && load+load/float64(n) > s.o.Cores {
		return fmt.Errorf("%w (%d mixers measured at %.2f of %.2f cores, mixer.cores)", ErrCapacity, n, load, s.o.Cores)
	}
	return nil
}

// status is a group's report to the supervisor.
func (s *Service) status(k key) supervise.Status {
	st := supervise.Status{Kind: "mixer", ID: k.String(), Session: k.session}
	s.mu.Lock()
	g := s.groups[k]
	if g != nil {
		st.Outputs = len(g.outs)
		st.Beats, st.Load = g.m.beats.Load(), g.m.Load()
		st.Inputs = len(*g.m.inputs.Load())
	}
	s.mu.Unlock()
	return st
}

// restart replaces a group's mixer that stopped ticking with a new one
// serving the same outputs.
func (s *Service) restart(k key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[k]
	if g == nil {
		return
	}
	old := g.m
	old.abandon()
	m, err := newMixer(old.id, k.session, k.group, g.room, &s.o)
	if err != nil {
		s.o.Logger.Error("mixer restart failed; the supervisor tries again", "session", k.session, "group", k.group, "err", err)
		return
	}
	for _, o := range g.outs {
		m.add(&o)
	}
	g.m = m
	s.o.Metrics.restarts.Inc()
	s.o.Logger.Info("mixer restarted", "session", k.session, "group", k.group, "outputs", len(g.outs))
}

// Crash makes a group's mixer crash as a bug would (its next tick
// panics): fault injection for tests and drills. It reports whether the
// group has a mixer.
func (s *Service) Crash(session, grp string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[key{session, grp}]
	if g != nil {
		g.m.crash.Store(true)
	}
	return g != nil
}

func (s *Service) detach(k key, id string) {
	s.mu.Lock()
	g := s.groups[k]
	if g == nil {
		s.mu.Unlock()
		return
	}
	delete(g.outs, id)
	last := len(g.outs) == 0
	if last {
		delete(s.groups, k)
	}
	m := g.m
	s.mu.Unlock()
	if !last {
		m.remove(id)
		return
	}
	if g.unwatch != nil {
		g.unwatch()
	}
	m.close()
	s.o.Metrics.mixers.Dec()
}

// Count is how many mixers run now.
func (s *Service) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.groups)
}

// Close stops every mixer.
func (s *Service) Close() {
	s.mu.Lock()
	gs := s.groups
	s.groups = map[key]*group{}
	s.mu.Unlock()
	for _, g := range gs {
		if g.unwatch != nil {
			g.unwatch()
		}
		g.m.close()
		s.o.Metrics.mixers.Dec()
	}
}

// Beep makes a member of a session hear a short tone (the floor was
// granted to it) on every mixed endpoint it has.
func (s *Service) Beep(session, member string) {
	s.mu.Lock()
	var ms []*Mixer
	for k, g := range s.groups {
		if k.session == session {
			ms = append(ms, g.m)
		}
	}
	s.mu.Unlock()
	for _, m := range ms {
		if m.beep(member) > 0 {
			s.o.Metrics.beeps.Inc()
		}
	}
}
