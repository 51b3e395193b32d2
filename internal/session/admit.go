package session

import (
	"fmt"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/media"
)

// Admission decides whether the node takes on something new (a join, a
// link, a mixer) predicted to add pps packets/s sent; a refusal is an
// error saying why. What it admits counts until release is called.
// *capacity.Governor is one.
type Admission interface {
	Admit(what string, pps float64) (release func(), err error)
}

// Typical packet rates of a track not measured yet (capacity.AudioPPS and
// VideoPPS; session does not import capacity for two numbers).
const (
	audioPPS = 50
	videoPPS = 200
)

// trackRate is a track's measured packet rate, sampled when an admission
// asks (at most once a second).
type trackRate struct {
	at      time.Time
	packets uint64
	pps     float64
}

// Admit asks the node's admission whether a member's new endpoint fits:
// one that receives the session's tracks (recv: a browser joining, a WHEP
// viewer) and/or sends audio and video to its receivers (send: a WHIP
// publisher). Admitted, the caller calls release when the endpoint is
// gone; the refusal wraps ErrUnavailable and the admission's error. A
// session that is not live, or a node without admission, admits.
func (s *Service) Admit(sessionID, memberID, what string, recv, send bool) (release func(), err error) {
	if s.o.Admission == nil {
		return func() {}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := s.live[sessionID]
	if ls == nil {
		return func() {}, nil
	}
	var pps float64
	for _, k := range []media.Kind{media.Audio, media.Video} {
		if recv {
			pps += s.receiving(ls, memberID, k)
		}
		if send {
			pps += s.sending(ls, memberID, k)
		}
	}
	return s.admit(what, pps)
}

// admitLink predicts what a new link adds: every track of its kind it
// receives (a mixed link: the one mix), and its own stream to every
// receiver of its kind; mu is held.
func (s *Service) admitLink(ls *liveSession, rec catalog.Link, member string) (release func(), err error) {
	if s.o.Admission == nil {
		return func() {}, nil
	}
	kind, _ := media.ParseKind(rec.Kind)
	dir := media.Direction(rec.Direction)
	var pps float64
	what := "link"
	switch {
	case rec.Mix != "":
		what, pps = "mixer", audioPPS
	case dir.Receives():
		pps = s.receiving(ls, member, kind)
	}
	if dir.Sends() {
		pps += s.sending(ls, member, kind)
	}
	return s.admit(what, pps)
}

func (s *Service) admit(what string, pps float64) (release func(), err error) {
	if release, err = s.o.Admission.Admit(what, pps); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return release, nil
}

// receiving is the packets/s a new receiver of kind k would be sent: the
// room's tracks of that kind but its member's own, one layer per simulcast
// source; mu is held.
func (s *Service) receiving(ls *liveSession, member string, k media.Kind) float64 {
	now := s.o.Now()
	var pps float64
	seen := map[*broker.Track]bool{}
	for _, t := range ls.room.Tracks() {
		seen[t] = true
		if t.Kind() != k || (member != "" && t.Owner() == member) || t.Info().Layer > 1 {
			continue
		}
		pps += ls.rateOf(t, now)
	}
	for t := range ls.rates {
		if !seen[t] {
			delete(ls.rates, t)
		}
	}
	return pps
}

// sending is the packets/s a new sender of kind k would cause: its stream
// to every other member's receiving link of that kind; mu is held.
func (s *Service) sending(ls *liveSession, member string, k media.Kind) float64 {
	n := 0
	for _, l := range ls.links {
		if l.rec.Kind == k.String() && media.Direction(l.rec.Direction).Receives() && (member == "" || l.member != member) {
			n++
		}
	}
	return float64(n) * typicalPPS(k)
}

func typicalPPS(k media.Kind) float64 {
	if k == media.Video {
		return videoPPS
	}
	return audioPPS
}

// rateOf is t's packet rate: measured over at least a second, else what a
// track of its kind typically sends; mu is held.
func (ls *liveSession) rateOf(t *broker.Track, now time.Time) float64 {
	if ls.rates == nil {
		ls.rates = map[*broker.Track]*trackRate{}
	}
	packets, _ := t.Stats()
	r := ls.rates[t]
	switch {
	case r == nil:
		ls.rates[t] = &trackRate{at: now, packets: packets}
	case now.Sub(r.at) >= time.Second:
		r.pps = float64(packets-r.packets) / now.Sub(r.at).Seconds()
		r.at, r.packets = now, packets
	}
	if r == nil || r.pps <= 0 {
		return typicalPPS(t.Kind())
	}
	return r.pps
}
