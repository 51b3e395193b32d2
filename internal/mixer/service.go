package mixer

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/convene/convene/internal/broker"
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
	mixers map[key]*Mixer
}

type key struct{ session, group string }

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
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{o: o, mixers: map[key]*Mixer{}}
}

// Attach makes out hear the mix of a session's group in room, starting
// the group's mixer if it has none. Detach with the returned function.
func (s *Service) Attach(session, group string, room *broker.Room, out *Output) (detach func(), err error) {
	if out.Sink == nil || out.Codec.Rate == 0 {
		return nil, fmt.Errorf("mixer: output %s needs a sink and a codec", out.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{session, group}
	m := s.mixers[k]
	if m == nil {
		if len(s.mixers) >= s.o.Max {
			s.o.Metrics.refused.Inc()
			return nil, fmt.Errorf("%w (%d mixers)", ErrCapacity, len(s.mixers))
		}
		if m, err = newMixer("mixer:"+group, session, group, room, &s.o); err != nil {
			return nil, err
		}
		s.mixers[k] = m
		s.o.Metrics.mixers.Inc()
	}
	m.add(out)
	var once sync.Once
	return func() { once.Do(func() { s.detach(k, m, out.ID) }) }, nil
}

func (s *Service) detach(k key, m *Mixer, id string) {
	s.mu.Lock()
	last := m.remove(id) == 0 && s.mixers[k] == m
	if last {
		delete(s.mixers, k)
	}
	s.mu.Unlock()
	if last {
		m.close()
		s.o.Metrics.mixers.Dec()
	}
}

// Count is how many mixers run now.
func (s *Service) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mixers)
}

// Close stops every mixer.
func (s *Service) Close() {
	s.mu.Lock()
	ms := s.mixers
	s.mixers = map[key]*Mixer{}
	s.mu.Unlock()
	for _, m := range ms {
		m.close()
		s.o.Metrics.mixers.Dec()
	}
}

// Beep makes a member of a session hear a short tone (the floor was
// granted to it) on every mixed endpoint it has.
func (s *Service) Beep(session, member string) {
	s.mu.Lock()
	var ms []*Mixer
	for k, m := range s.mixers {
		if k.session == session {
			ms = append(ms, m)
		}
	}
	s.mu.Unlock()
	for _, m := range ms {
		if m.beep(member) > 0 {
			s.o.Metrics.beeps.Inc()
		}
	}
}
