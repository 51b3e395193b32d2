package session

import (
	"context"
	"fmt"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/floor"
	"github.com/convene/convene/internal/media"
)

// LinkWebRTC is the type of a browser's (or a WHIP or WHEP client's)
// media. Such links are live: they exist while their peer connection does
// and are never stored, so a restarted node does not bring them back (the
// browser reconnects instead).
const LinkWebRTC = "webrtc"

// NewLiveLink describes one track of a live endpoint: what it sends
// (Sends) or that it receives the room's tracks of Kind.
type NewLiveLink struct {
	Type   string
	Kind   media.Kind
	Sends  bool
	Source string // microphone, camera, screen, composite; "" for a receiver
	Remote string // the endpoint's address, if known
}

// Place is where a live link's media goes in its room: the ID it joins the
// room with (the link's ID: subgroup moves find it by that), its member,
// the member's subgroup, and whether its track starts behind a closed
// floor gate.
type Place struct {
	LinkID string
	Member string
	Group  string
	Gated  bool
}

// LiveOpener joins a live link's media to room at its place.
type LiveOpener func(room *broker.Room, at Place) (Media, error)

// AttachLive attaches one track of a member's live endpoint to an active
// session, under the member's role (a listener never sends), subgroup and
// floor gate, like any other link; it is listed among the session's links
// and closed when the member leaves or the session stops.
func (s *Service) AttachLive(ctx context.Context, sessionID, memberID string, req NewLiveLink, open LiveOpener) (Link, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return Link{}, ErrDraining
	}
	if s.live[sessionID] == nil && s.o.Node != "" {
		if rec, err := s.o.Catalog.GetSession(ctx, sessionID); err == nil && rec.State == StateActivated {
			if err := s.participate(ctx, sessionID); err != nil {
				return Link{}, err
			}
		}
	}
	ls := s.live[sessionID]
	c := s.ctl[sessionID]
	if ls == nil || c == nil {
		return Link{}, fmt.Errorf("%w: session %s is not %s", ErrConflict, sessionID, StateActivated)
	}
	mem, ok := s.member(ctx, c, sessionID, memberID)
	if !ok {
		return Link{}, fmt.Errorf("%w: session %s has no member %q", ErrNotFound, sessionID, memberID)
	}
	dir := media.RecvOnly
	if req.Sends {
		if mem.Role == floor.RoleListener {
			return Link{}, fmt.Errorf("%w: a listener does not send media", ErrForbidden)
		}
		dir = media.SendOnly
	}
	rec := catalog.Link{ID: newID("w_"), SessionID: sessionID, Type: req.Type, Kind: req.Kind.String(),
		Direction: string(dir), Remote: req.Remote, CreatedAt: s.o.Now().UTC()}
	at := Place{LinkID: rec.ID, Member: memberID, Group: mem.Subgroup, Gated: !c.floors.Holds(memberID, rec.Kind)}
	m, err := open(ls.room, at)
	if err != nil {
		return Link{}, err
	}
	l := &liveLink{rec: rec, media: m, member: memberID, live: true, source: req.Source}
	c.gates.add(rec.ID, memberID, req.Kind, m.Track())
	ls.links[rec.ID] = l
	v := linkView(l)
	s.publish(sessionID, event.LinkAdded, v)
	return v, nil
}

// DetachLive closes a live link; it is a no-op for one already gone.
func (s *Service) DetachLive(sessionID, linkID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := s.live[sessionID]
	if ls == nil {
		return
	}
	l := ls.links[linkID]
	if l == nil || !l.live {
		return
	}
	s.closeLink(l)
	delete(ls.links, linkID)
	if c := s.ctl[sessionID]; c != nil {
		c.gates.remove(linkID)
	}
	s.publish(sessionID, event.LinkRemoved, map[string]string{"id": linkID, "member": l.member})
}

// Announce puts an event of a live endpoint (mute state, active speakers)
// on the session's event stream.
func (s *Service) Announce(sessionID string, t event.Type, data any) {
	s.publish(sessionID, t, data)
}

// AnnounceAll puts an event on the stream of every session live on the
// node (the node's load shedding).
func (s *Service) AnnounceAll(t event.Type, data any) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.publish(id, t, data)
	}
}
