package sfu

import (
	"errors"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/capacity"
	"github.com/convene/convene/internal/media"
)

// admit asks the node whether a new peer fits its capacity: a browser's
// join or a WHEP viewer receives the session's tracks, a WHIP publisher
// sends to its receivers. A member whose browser reconnects (its old peer
// is still in the room) was admitted already.
func (s *SFU) admit(sessionID, memberID string, m mode) error {
	if s.cfg.Admit == nil {
		return nil
	}
	s.mu.Lock()
	r := s.rooms[sessionID]
	again := r != nil && r.peers[memberID] != nil
	s.mu.Unlock()
	if again {
		return nil
	}
	what := map[mode]string{modeBrowser: "join", modeWHIP: "whip", modeWHEP: "whep"}[m]
	err := s.cfg.Admit(sessionID, memberID, what, m != modeWHIP, m == modeWHIP)
	if errors.Is(err, capacity.ErrOverCapacity) {
		s.m.refused.WithLabelValues("capacity").Inc()
	}
	return err
}

// joinErrorCode is the error frame's code for a refused join: the web app
// shows over_capacity as "server busy".
func joinErrorCode(err error) string {
	if errors.Is(err, capacity.ErrOverCapacity) {
		return "over_capacity"
	}
	return "fatal"
}

// alternatives are the nodes with room a refusal names (cluster mode).
func alternatives(err error) []capacity.Alternative {
	var r *capacity.Refusal
	if errors.As(err, &r) {
		return r.Alternatives
	}
	return nil
}

// level is the node's shed level now.
func (s *SFU) level() capacity.Level {
	if s.cfg.Shed == nil {
		return capacity.Normal
	}
	return s.cfg.Shed()
}

// shed reports whether the node sheds a video packet of from to the
// peer: at SpeakersVideo unless its member is an active speaker, at
// NoVideo always. Audio is never shed. Media goroutines; cheap.
func (p *Peer) shed(kind media.Kind, from *broker.Track) bool {
	if kind != media.Video {
		return false
	}
	switch lvl := p.s.level(); {
	case lvl >= capacity.NoVideo:
		return true
	case lvl >= capacity.SpeakersVideo:
		return p.room == nil || !p.room.speakers.speaking(memberOf(from))
	}
	return false
}

// Restored is told that the shed level went down: the video it let
// through again starts on a keyframe.
func (s *SFU) Restored(from, to capacity.Level) {
	if from < capacity.SpeakersVideo || to >= from {
		return
	}
	s.mu.Lock()
	var ps []*Peer
	for _, r := range s.rooms {
		for _, p := range r.peers {
			ps = append(ps, p)
		}
	}
	s.mu.Unlock()
	asked := map[*broker.Track]bool{}
	for _, p := range ps {
		for _, d := range p.downTracks() {
			if t := d.target.Load(); t != nil && d.kind == media.Video && !asked[t] {
				asked[t] = true
				t.RequestKeyframe()
			}
		}
	}
}
