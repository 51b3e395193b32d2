package session

import (
	"context"
	"fmt"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/event"
)

// NewSession is a request to create a session. Without StartAt (or with
// one not in the future) the session is activated at once; otherwise it is
// created and the scheduler activates it at StartAt. With EndAt the
// scheduler finishes it then.
type NewSession struct {
	Name    string    `json:"name"`
	StartAt time.Time `json:"start_at,omitzero"`
	EndAt   time.Time `json:"end_at,omitzero"`
}

// CreateSession stores a new session, activated now or scheduled.
func (s *Service) CreateSession(ctx context.Context, req NewSession) (Session, error) {
	if len(req.Name) > 200 {
		return Session{}, fmt.Errorf("%w: name is longer than 200 bytes", ErrInvalid)
	}
	now := s.o.Now().UTC()
	if !req.EndAt.IsZero() && (!req.EndAt.After(now) || (!req.StartAt.IsZero() && !req.EndAt.After(req.StartAt))) {
		return Session{}, fmt.Errorf("%w: end_at must be in the future and after start_at", ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return Session{}, ErrDraining
	}
	if s.o.MaxSessions > 0 && len(s.ctl) >= s.o.MaxSessions {
		return Session{}, fmt.Errorf("%w: %d sessions are open (sessions.max)", ErrLimit, len(s.ctl))
	}
	scheduled := req.StartAt.After(now)
	state := StateActivated
	if scheduled {
		state = StateCreated
	}
	rec := catalog.Session{ID: newID("s_"), Name: req.Name, State: state, CreatedAt: now, UpdatedAt: now,
		StartAt: req.StartAt.UTC(), EndAt: req.EndAt.UTC()}
	if req.StartAt.IsZero() {
		rec.StartAt = time.Time{}
	}
	if req.EndAt.IsZero() {
		rec.EndAt = time.Time{}
	}
	if err := s.o.Catalog.CreateSession(ctx, rec); err != nil {
		return Session{}, wrapCatalog(err)
	}
	if _, err := s.acquire(ctx, rec.ID); err != nil { // a new session: nobody else holds it
		return Session{}, err
	}
	s.newControl(rec.ID)
	s.publish(rec.ID, event.Created, map[string]any{"name": req.Name, "start_at": rec.StartAt, "end_at": rec.EndAt})
	if !scheduled {
		s.live[rec.ID] = &liveSession{room: s.o.Broker.Open(rec.ID), links: map[string]*liveLink{}}
		s.publish(rec.ID, event.Activated, nil)
	}
	s.arm(rec)
	s.log.Info("session created", "session", rec.ID, "name", req.Name, "state", state)
	if s.o.OnCreated != nil {
		go s.o.OnCreated(rec.ID)
	}
	return s.view(rec), nil
}

// Create stores a new session and activates it: its room is open for links.
func (s *Service) Create(ctx context.Context, name string) (Session, error) {
	return s.CreateSession(ctx, NewSession{Name: name})
}

// End finishes a session (or cancels one that has not started): its links
// are closed, its room closed.
func (s *Service) End(ctx context.Context, id string) (Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.o.Catalog.GetSession(ctx, id)
	if err != nil {
		return Session{}, wrapCatalog(err)
	}
	if rec.State == StateCreated {
		return s.transition(ctx, id, ActionCancel)
	}
	return s.transition(ctx, id, ActionFinish)
}

// Transition applies a lifecycle action; an illegal one is a *StateError.
func (s *Service) Transition(ctx context.Context, id, action string) (Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.transition(ctx, id, action)
}

func (s *Service) transition(ctx context.Context, id, action string) (Session, error) {
	known := false
	for _, a := range Actions {
		known = known || a == action
	}
	if !known {
		return Session{}, fmt.Errorf("%w: action must be activate, deactivate, cancel or finish, not %q", ErrInvalid, action)
	}
	rec, err := s.o.Catalog.GetSession(ctx, id)
	if err != nil {
		return Session{}, wrapCatalog(err)
	}
	to, ok := Next(rec.State, action)
	if !ok {
		return Session{}, &StateError{State: rec.State, Action: action}
	}
	if to == StateActivated && s.draining {
		return Session{}, ErrDraining
	}
	now := s.o.Now().UTC()
	if err := s.o.Catalog.SetSessionState(ctx, id, to, now); err != nil {
		return Session{}, wrapCatalog(err)
	}
	switch to {
	case StateActivated:
		if s.ctl[id] == nil {
			if _, err := s.loadControl(ctx, id); err != nil {
				return Session{}, err
			}
		}
		if err := s.openMedia(ctx, id); err != nil {
			return Session{}, err
		}
	case StateDeactivated:
		s.closeMedia(id)
	case StateFinished, StateCanceled:
		s.closeMedia(id)
		s.o.Broker.Remove(id)
		s.dropControl(id)
		s.disarm(id)
	}
	rec.State, rec.UpdatedAt = to, now
	s.publish(id, stateEvent[to], nil)
	s.log.Info("session "+to, "session", id)
	return s.view(rec), nil
}

// openMedia opens a session's room and reattaches its stored links; a link
// that cannot be reopened is logged and left in the catalog. mu is held.
func (s *Service) openMedia(ctx context.Context, id string) error {
	if s.live[id] != nil {
		return nil
	}
	ls := &liveSession{room: s.o.Broker.Open(id), links: map[string]*liveLink{}}
	s.live[id] = ls
	return s.restoreLinks(ctx, id, ls, "")
}

// restoreLinks attaches the session's stored links this node runs (see
// restores) and, with rehome, those of node rehome (an owner that stopped:
// they move here); mu is held.
func (s *Service) restoreLinks(ctx context.Context, id string, ls *liveSession, rehome string) error {
	links, err := s.o.Catalog.ListLinks(ctx, id)
	if err != nil {
		return err
	}
	c := s.ctl[id]
	for _, lr := range links {
		if ls.links[lr.ID] != nil {
			continue
		}
		mine, err := s.restores(ctx, id, lr.ID, rehome)
		if err != nil {
			return err
		}
		if !mine {
			continue
		}
		member, err := s.o.Catalog.LinkMember(ctx, lr.ID)
		if err != nil {
			return err
		}
		policed, err := s.o.Catalog.LinkPoliced(ctx, lr.ID)
		if err != nil {
			return err
		}
		l, err := s.attach(c, lr, member, policed, linkExtras{}, ls.room)
		if err != nil {
			s.log.Error("restore link", "session", id, "link", lr.ID, "err", err)
			continue
		}
		ls.links[lr.ID] = l
		if rehome != "" && s.o.Node != "" {
			if err := s.o.Catalog.SetLinkNode(ctx, lr.ID, s.o.Node); err != nil {
				s.log.Warn("re-home link", "session", id, "link", lr.ID, "err", err)
			}
			v := linkView(l)
			s.publish(id, event.LinkAdded, v) // its new local address, for the endpoint to send to
			s.log.Info("link re-homed", "session", id, "link", lr.ID, "from", rehome, "local", v.Local)
		}
	}
	return nil
}

// closeMedia stops a session's links (the catalog keeps them) and closes
// its room; mu is held.
func (s *Service) closeMedia(id string) {
	ls := s.live[id]
	if ls == nil {
		return
	}
	c := s.ctl[id]
	for lid, l := range ls.links {
		s.closeLink(l)
		if c != nil {
			c.gates.remove(lid)
		}
	}
	delete(s.live, id)
	s.o.Broker.Remove(id)
}

// arm sets the scheduler's timers of a session; mu is held.
func (s *Service) arm(rec catalog.Session) {
	s.disarm(rec.ID)
	now := s.o.Now()
	var ts []*time.Timer
	if rec.State == StateCreated && !rec.StartAt.IsZero() {
		ts = append(ts, time.AfterFunc(rec.StartAt.Sub(now), func() { s.fire(rec.ID, ActionActivate) }))
	}
	if !Final(rec.State) && !rec.EndAt.IsZero() {
		ts = append(ts, time.AfterFunc(rec.EndAt.Sub(now), func() { s.fire(rec.ID, ActionFinish) }))
	}
	if len(ts) > 0 {
		s.timers[rec.ID] = ts
	}
}

func (s *Service) disarm(id string) {
	for _, t := range s.timers[id] {
		t.Stop()
	}
	delete(s.timers, id)
}

// fire is a scheduler timer going off.
func (s *Service) fire(id, action string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining || !s.Owns(id) {
		return
	}
	ctx := context.Background()
	if action == ActionFinish {
		// A session scheduled to end before it started is canceled.
		if rec, err := s.o.Catalog.GetSession(ctx, id); err == nil && rec.State == StateCreated {
			action = ActionCancel
		}
	}
	if _, err := s.transition(ctx, id, action); err != nil {
		s.log.Warn("scheduled "+action, "session", id, "err", err)
	}
}

// Restore brings back what was running when the node stopped: active
// sessions get their rooms and links, every session not over gets its
// members and floors (floor styles and tokens are not kept: they start
// over as "none"), and the scheduler's timers are set again — a start or
// end time that passed while the node was down takes effect now.
func (s *Service) Restore(ctx context.Context) error {
	recs, err := s.o.Catalog.ListSessions(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rec := range recs {
		if Final(rec.State) || s.ctl[rec.ID] != nil {
			continue
		}
		if ok, err := s.acquire(ctx, rec.ID); err != nil {
			return err
		} else if !ok {
			continue // another node's; RunLeases takes it if its lease expires
		}
		if _, err := s.loadControl(ctx, rec.ID); err != nil {
			return err
		}
		if rec.State == StateActivated {
			if err := s.openMedia(ctx, rec.ID); err != nil {
				return err
			}
			s.log.Info("session restored", "session", rec.ID, "links", len(s.live[rec.ID].links))
		}
		s.arm(rec)
	}
	return nil
}

// Room returns the broker room of an activated session, nil for any other
// (a recording taps it; it goes away when the session leaves activated).
func (s *Service) Room(id string) *broker.Room { return s.roomOf(id) }

// Attend returns the room of an activated session, opening it on this
// node, as for a member's link here, when another node owns the session
// and nobody here takes part yet: a recording placed on this node taps
// the tracks the room pulls from the others (opened reports that it was
// opened now, before the other nodes' tracks could be heard of). Without
// a cluster it is Room.
func (s *Service) Attend(ctx context.Context, id string) (room *broker.Room, opened bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return nil, false, ErrDraining
	}
	if ls := s.live[id]; ls != nil {
		return ls.room, false, nil
	}
	if s.o.Node == "" {
		return nil, false, fmt.Errorf("%w: session %s is not %s", ErrConflict, id, StateActivated)
	}
	rec, err := s.o.Catalog.GetSession(ctx, id)
	if err != nil {
		return nil, false, wrapCatalog(err)
	}
	if rec.State != StateActivated {
		return nil, false, fmt.Errorf("%w: session %s is not %s", ErrConflict, id, StateActivated)
	}
	if err := s.participate(ctx, id); err != nil {
		return nil, false, wrapCatalog(err)
	}
	if ls := s.live[id]; ls != nil {
		return ls.room, true, nil
	}
	return nil, false, fmt.Errorf("%w: session %s is not %s", ErrConflict, id, StateActivated)
}

// roomOf is the broker room of an active session.
func (s *Service) roomOf(id string) *broker.Room {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ls := s.live[id]; ls != nil {
		return ls.room
	}
	return nil
}
