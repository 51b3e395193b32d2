package session

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/convene/convene/internal/floor"
)

// FloorsToChange returns a session's floor controller for a primitive or
// a style change: only on the session's owner node; elsewhere it is a
// conflict naming the owner, since only the owner's floors decide (and
// only its writes pass the catalog's fence).
func (s *Service) FloorsToChange(ctx context.Context, id string) (*floor.Controller, error) {
	if s.o.Node == "" {
		return s.Floors(ctx, id)
	}
	s.mu.Lock()
	c, err := s.control(ctx, id)
	if err == nil && s.Owns(id) {
		s.syncMembers(ctx, c, id) // members may have joined through other nodes
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if s.Owns(id) {
		return c.floors, nil
	}
	owner := "another node"
	if l, err := s.o.Catalog.Owner(ctx, id); err == nil {
		owner = "node " + l.Node
	}
	return nil, fmt.Errorf("%w: session %s's floors are held by %s, its owner; send floor requests there", ErrConflict, id, owner)
}

// FloorsChanged tells the service that another node changed a session's
// floors (its floor event came over NATS): a node that does not own the
// session applies the owner's state to its gates as soon as the owner has
// stored it — looked for now and shortly after, since the owner stores
// just after it tells — and in any case at the next lease round.
func (s *Service) FloorsChanged(id string) {
	if s.Owns(id) {
		return
	}
	for _, d := range []time.Duration{0, 50 * time.Millisecond, 250 * time.Millisecond} {
		time.AfterFunc(d, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if c := s.ctl[id]; c != nil && !s.Owns(id) {
				s.mirrorFloors(context.Background(), id, c)
			}
		})
	}
}

// mirrorFloors applies the owner's stored floor states to the gates of
// this node's tracks of a session it does not own: a track is gated while
// its floor is enforced and its member holds no token, as on the owner;
// mu is held.
func (s *Service) mirrorFloors(ctx context.Context, id string, c *control) {
	saved, err := s.o.Catalog.FloorStates(ctx, id)
	if err != nil {
		s.log.Warn("read the owner's floors", "session", id, "err", err)
		return
	}
	changed := false
	for name, b := range saved {
		if string(b) == c.mirrored[name] {
			continue
		}
		changed = true
		var st floor.State
		if err := json.Unmarshal(b, &st); err != nil {
			continue
		}
		holders := map[string]bool{}
		for _, t := range st.Tokens {
			if t.Holder != "" {
				holders[t.Holder] = true
			}
		}
		c.gates.set(name, st.Style != floor.StyleNone, holders)
		c.mirrored[name] = string(b)
	}
	if changed { // the reader's copy too, for the API and the web app here
		old := c.floors
		c.floors = s.newFloors(id, c)
		for _, m := range c.members {
			c.floors.AddMember(m.ID, m.Role, m.Subgroup)
		}
		s.restoreFloors(id, c, saved)
		old.Close()
	}
}
