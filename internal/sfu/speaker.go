package sfu

import (
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/convene/convene/internal/event"
)

// speakers finds a room's active speakers from the RFC 6464 audio levels
// its publishers send: the loudest members above a voice threshold, at
// most maxSpeakers, announced when the set has held for two ticks.
type speakers struct {
	session  string
	sessions Sessions
	log      *slog.Logger

	mu      sync.Mutex
	tracks  map[*upTrack]bool
	current []string // announced
	pending []string // seen last tick
	top     string
	// video are the members whose video a shedding node still forwards
	// (SpeakersVideo): the announced speakers and the last loudest.
	video atomic.Pointer[map[string]bool]
}

const (
	maxSpeakers = 3
	// voiceLevel: a smoothed level under 50 -dBov (louder) is speech.
	voiceLevel = 50 * 100
)

func newSpeakers(session string, s Sessions, log *slog.Logger) *speakers {
	return &speakers{session: session, sessions: s, log: log, tracks: map[*upTrack]bool{}}
}

func (s *speakers) add(u *upTrack) {
	s.mu.Lock()
	s.tracks[u] = true
	s.mu.Unlock()
}

func (s *speakers) remove(u *upTrack) {
	s.mu.Lock()
	delete(s.tracks, u)
	s.mu.Unlock()
}

// loudest returns the member speaking loudest now ("" for none).
func (s *speakers) loudest() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.top
}

// tick evaluates the levels.
func (s *speakers) tick() {
	s.mu.Lock()
	best := map[string]int32{}
	for u := range s.tracks {
		if u.track == nil || u.track.Gated() {
			continue // a member without the floor is not heard
		}
		lv := u.level.Load()
		if lv > voiceLevel {
			continue
		}
		if old, ok := best[u.p.member]; !ok || lv < old {
			best[u.p.member] = lv
		}
	}
	ms := make([]string, 0, len(best))
	for m := range best {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool {
		if best[ms[i]] != best[ms[j]] {
			return best[ms[i]] < best[ms[j]]
		}
		return ms[i] < ms[j]
	})
	if len(ms) > maxSpeakers {
		ms = ms[:maxSpeakers]
	}
	if len(ms) > 0 {
		s.top = ms[0]
	}
	announce := false
	if same(ms, s.pending) && !same(ms, s.current) {
		s.current = ms
		announce = true
	}
	s.pending = ms
	video := make(map[string]bool, len(s.current)+1)
	for _, m := range s.current {
		video[m] = true
	}
	if s.top != "" {
		video[s.top] = true
	}
	s.video.Store(&video)
	s.mu.Unlock()
	if announce {
		s.sessions.Announce(s.session, event.SpeakerActive, map[string]any{"members": ms})
	}
}

// speaking reports whether member is among the speakers whose video a
// shedding node still forwards; media goroutines, no lock.
func (s *speakers) speaking(member string) bool {
	v := s.video.Load()
	return v != nil && (*v)[member]
}

func same(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	set := map[string]bool{}
	for _, x := range a {
		set[x] = true
	}
	for _, x := range b {
		if !set[x] {
			return false
		}
	}
	return true
}
