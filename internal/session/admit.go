package session

import (
	"fmt"
	"math"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/media"
)

// Admission decides whether the node takes on something new (a join, a
// link, a mixer) predicted to add pps packets/s sent; a refusal is an
// error saying why. *capacity.Governor is one.
type Admission interface {
	Admit(what string, pps float64) error
}

// Typical packet rates of a track not measured yet (capacity.AudioPPS and
// VideoPPS; session does not import capacity for two numbers).
const (
	audioPPS = 50
	videoPPS = 200
)

// trackRate is a track's measured packet rate, sampled at most every
// rateWindow (by Predicted, which the node calls twice a second, and by
// admissions).
const (
	rateWindow = 500 * time.Millisecond
	rateHold   = 0.95 // the peak rate kept after a second
)

type trackRate struct {
	at      time.Time
	packets uint64
	pps     float64
}

// Admit asks the node's admission whether a member's new endpoint fits:
// one that receives the session's tracks (recv: a browser joining, a WHEP
// viewer) and/or sends audio and video to its receivers (send: a WHIP
// publisher). The refusal wraps ErrUnavailable and the admission's error.
// A session that is not live, or a node without admission, admits.
func (s *Service) Admit(sessionID, memberID, what string, recv, send bool) error {
	if s.o.Admission == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := s.live[sessionID]
	if ls == nil {
		return nil
	}
	r := ls.measure(s.o.Now())
	var pps float64
	for _, k := range []media.Kind{media.Audio, media.Video} {
		if recv {
			pps += r.receiving(memberID, k)
		}
		if send {
			pps += ls.sending(memberID, k)
		}
	}
	return s.admit(what, pps)
}

// admitLink predicts what a new link adds: every track of its kind it
// receives (a mixed link: the one mix), and its own stream to every
// receiver of its kind; mu is held.
func (s *Service) admitLink(ls *liveSession, rec catalog.Link, member string) error {
	if s.o.Admission == nil {
		return nil
	}
	kind, _ := media.ParseKind(rec.Kind)
	dir := media.Direction(rec.Direction)
	var pps float64
	what := "link"
	switch {
	case rec.Mix != "":
		what, pps = "mixer", audioPPS
	case dir.Receives():
		pps = ls.measure(s.o.Now()).receiving(member, kind)
	}
	if dir.Sends() {
		pps += ls.sending(member, kind)
	}
	return s.admit(what, pps)
}

func (s *Service) admit(what string, pps float64) error {
	if err := s.o.Admission.Admit(what, pps); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Predicted is the packets/s the node's links are predicted to be sent:
// for every receiving link, the tracks of its kind it receives at their
// measured rates (a mixed link: one mix). Admission goes by it where it
// is more than the load: members who joined before their media flows
// count.
func (s *Service) Predicted() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	var pps float64
	for _, ls := range s.live {
		r := ls.measure(now)
		for _, l := range ls.links {
			kind, _ := media.ParseKind(l.rec.Kind)
			switch {
			case !media.Direction(l.rec.Direction).Receives():
			case l.rec.Mix != "":
				pps += audioPPS
			default:
				pps += r.receiving(l.member, kind)
			}
		}
	}
	return pps
}

// roomRates are a room's track rates summed by kind, and by kind for each
// member's own tracks (which its links do not receive).
type roomRates struct {
	total [2]float64
	own   map[string]*[2]float64
}

// receiving is the packets/s a new receiver of member (or none) of kind
// k is sent.
func (r roomRates) receiving(member string, k media.Kind) float64 {
	v := r.total[k]
	if o := r.own[member]; member != "" && o != nil {
		v -= o[k]
	}
	return v
}

// measure sums the room's tracks' rates, one layer a simulcast source,
// and forgets the tracks that are gone; mu is held.
func (ls *liveSession) measure(now time.Time) roomRates {
	r := roomRates{own: map[string]*[2]float64{}}
	seen := map[*broker.Track]bool{}
	for _, t := range ls.room.Tracks() {
		seen[t] = true
		if t.Info().Layer > 1 {
			continue
		}
		k, pps := t.Kind(), ls.rateOf(t, now)
		r.total[k] += pps
		if o := t.Owner(); o != "" {
			if r.own[o] == nil {
				r.own[o] = &[2]float64{}
			}
			r.own[o][k] += pps
		}
	}
	for t := range ls.rates {
		if !seen[t] {
			delete(ls.rates, t)
		}
	}
	return r
}

// sending is the packets/s a new sender of kind k would cause: its stream
// to every other member's receiving link of that kind; mu is held.
func (ls *liveSession) sending(member string, k media.Kind) float64 {
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

// rateOf is t's packet rate: the peak of its rates measured over half a
// second or more, held while it decays by 5 % a second (a pause, a
// silence, does not make a speaker look cheap at once), else what a track
// of its kind typically sends; mu is held.
func (ls *liveSession) rateOf(t *broker.Track, now time.Time) float64 {
	if ls.rates == nil {
		ls.rates = map[*broker.Track]*trackRate{}
	}
	packets, _ := t.Stats()
	r := ls.rates[t]
	switch {
	case r == nil:
		ls.rates[t] = &trackRate{at: now, packets: packets}
	case now.Sub(r.at) >= rateWindow:
		dt := now.Sub(r.at).Seconds()
		r.pps = max(float64(packets-r.packets)/dt, r.pps*math.Pow(rateHold, dt))
		r.at, r.packets = now, packets
	}
	if r == nil || r.pps <= 0 {
		return typicalPPS(t.Kind())
	}
	return r.pps
}
