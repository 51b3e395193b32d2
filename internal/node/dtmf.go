package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/floor"
	"github.com/convene/convene/internal/mixer"
	"github.com/convene/convene/internal/session"
)

// dtmf turns the digits phones send (RFC 4733, read on their links) into
// session actions: *1 requests the audio floor, or releases it when the
// member holds it; *6 mutes or unmutes the member's audio.
type dtmf struct {
	sessions *session.Service
	log      *slog.Logger
	mu       sync.Mutex
	star     map[string]time.Time // session/member → when it pressed *
	last     map[string]time.Time // session/member → its last action
}

func newDTMF(s *session.Service, log *slog.Logger) *dtmf {
	return &dtmf{sessions: s, log: log, star: map[string]time.Time{}, last: map[string]time.Time{}}
}

// digit takes one digit; it never blocks (actions run on a goroutine of
// their own, at most one per member per half second).
func (d *dtmf) digit(sessionID, member string, dg byte) {
	key := sessionID + "/" + member
	now := time.Now()
	d.mu.Lock()
	at, starred := d.star[key]
	delete(d.star, key)
	if dg == '*' {
		d.star[key] = now
	}
	act := dg != '*' && starred && now.Sub(at) < 3*time.Second && now.Sub(d.last[key]) > 500*time.Millisecond
	if act {
		d.last[key] = now
	}
	if len(d.last)+len(d.star) > 4096 { // members come and go: forget the old
		for k, t := range d.last {
			if now.Sub(t) > 3*time.Second {
				delete(d.last, k)
			}
		}
		for k, t := range d.star {
			if now.Sub(t) > 3*time.Second {
				delete(d.star, k)
			}
		}
	}
	d.mu.Unlock()
	if !act {
		return
	}
	switch dg {
	case '1':
		go d.toggleFloor(sessionID, member)
	case '6':
		go d.toggleMute(sessionID, member)
	}
}

func (d *dtmf) toggleMute(sessionID, member string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	muted, err := d.sessions.Muted(ctx, sessionID, member, "audio")
	if err == nil {
		err = d.sessions.SetMuted(ctx, sessionID, member, "audio", !muted)
	}
	if err != nil {
		d.log.Info("dtmf *6", "session", sessionID, "member", member, "err", err)
	}
}

func (d *dtmf) toggleFloor(sessionID, member string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.sessions.FloorsToChange(ctx, sessionID)
	if err != nil {
		d.log.Info("dtmf floor", "session", sessionID, "member", member, "err", err)
		return
	}
	if c.Holds(member, "audio") {
		_, err = c.Release(member, "audio")
	} else {
		_, err = c.Request(member, "audio")
	}
	if err == nil {
		err = d.sessions.FloorsSaved(ctx, sessionID)
	}
	if err != nil {
		d.log.Info("dtmf *1", "session", sessionID, "member", member, "err", err)
	}
}

// floorTones passes the session's events on and plays the floor-granted
// tone to a member whose audio floor request is granted (a phone hears
// that it may speak).
type floorTones struct {
	session.Publisher
	mixers *mixer.Service
}

func (f floorTones) SessionEvent(sessionID string, typ event.Type, data any) error {
	if r, ok := data.(floor.Request); ok && typ == event.FloorRequest && r.Status == floor.Granted && r.Floor == "audio" {
		f.mixers.Beep(sessionID, r.Member)
	}
	return f.Publisher.SessionEvent(sessionID, typ, data)
}
