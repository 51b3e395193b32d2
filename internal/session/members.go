package session

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/floor"
	"github.com/convene/convene/internal/media"
)

// control is what a session that is not over has besides its media: its
// members, subgroups and floors. It exists from creation to finish or
// cancel, across deactivation.
type control struct {
	floors    *floor.Controller
	saver     *floorSaver
	gates     *gates
	members   map[string]catalog.Member
	subgroups map[string]catalog.Subgroup
	// mirrored are the owner's floor states (as stored) last applied to
	// the gates, on a node that does not own the session (floormirror.go).
	mirrored map[string]string
}

// Member is a session member as the API shows it.
type Member struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Role     string    `json:"role"`
	Subgroup string    `json:"subgroup,omitempty"`
	JoinedAt time.Time `json:"joined_at"`
	Links    []string  `json:"links"`
}

// Subgroup is a private group of a session.
type Subgroup struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Members   []string  `json:"members"`
}

// newControl is called with mu held.
func (s *Service) newControl(id string) *control {
	g := newGates()
	c := &control{gates: g, saver: newFloorSaver(), members: map[string]catalog.Member{}, subgroups: map[string]catalog.Subgroup{},
		mirrored: map[string]string{}}
	c.floors = s.newFloors(id, c)
	go c.saver.run(func(ctx context.Context, name string, b []byte) error { return s.saveFloor(ctx, id, name, b) },
		id, c.floors, s.log)
	s.ctl[id] = c
	return c
}

// newFloors makes a session's floor controller. Only the owner's floors
// decide and tell: on any other node the controller is a reader's copy,
// and the gates follow the owner's stored state (mirrorFloors).
func (s *Service) newFloors(id string, c *control) *floor.Controller {
	return floor.New(floor.Options{
		Emit: func(typ event.Type, data any) {
			if !s.Owns(id) {
				return
			}
			s.publish(id, typ, data)
			c.saver.changed(typ)
		},
		Gate: func(name string, enforced bool, holders map[string]bool) {
			if s.Owns(id) {
				c.gates.set(name, enforced, holders)
			}
		},
		Activity: c.gates.activity,
		Now:      s.o.Now,
	})
}

// dropControl is called with mu held.
func (s *Service) dropControl(id string) {
	if c := s.ctl[id]; c != nil {
		c.floors.Close()
		c.saver.close()
		delete(s.ctl, id)
	}
}

// control returns a session's control or a clear error; mu is held.
func (s *Service) control(ctx context.Context, id string) (*control, error) {
	if c := s.ctl[id]; c != nil {
		return c, nil
	}
	rec, err := s.o.Catalog.GetSession(ctx, id)
	if err != nil {
		return nil, wrapCatalog(err)
	}
	if s.o.Node != "" && !Final(rec.State) && !s.draining { // owned by another node
		if rec.State == StateActivated {
			err = s.participate(ctx, id)
		} else {
			_, err = s.loadControl(ctx, id)
		}
		if err != nil {
			return nil, err
		}
		return s.ctl[id], nil
	}
	return nil, &StateError{State: rec.State, Action: "change"}
}

// member returns a member of a session, from the catalog when c does not
// know it yet (it joined through another node); mu is held.
func (s *Service) member(ctx context.Context, c *control, sessionID, memberID string) (catalog.Member, bool) {
	if m, ok := c.members[memberID]; ok || s.o.Node == "" {
		return m, ok
	}
	s.syncMembers(ctx, c, sessionID)
	m, ok := c.members[memberID]
	return m, ok
}

// syncMembers catches c up with what other nodes did to the session's
// members: members who joined there are added, subgroups made there are
// known, and a member moved there is moved here too, with this node's
// links of it (so subgroups hold in every node's room); mu is held.
func (s *Service) syncMembers(ctx context.Context, c *control, sessionID string) {
	gs, err := s.o.Catalog.ListSubgroups(ctx, sessionID)
	if err != nil {
		s.log.Warn("read subgroups", "session", sessionID, "err", err)
		return
	}
	for _, g := range gs {
		c.subgroups[g.ID] = g
	}
	ms, err := s.o.Catalog.ListMembers(ctx, sessionID)
	if err != nil {
		s.log.Warn("read members", "session", sessionID, "err", err)
		return
	}
	for _, m := range ms {
		old, ok := c.members[m.ID]
		switch {
		case !ok:
			c.members[m.ID] = m
			c.floors.AddMember(m.ID, m.Role, m.Subgroup)
		case old.Subgroup != m.Subgroup:
			s.regroup(sessionID, c, m.ID, m.Subgroup)
		}
	}
}

// Floors returns the floor controller of a session that is not over.
func (s *Service) Floors(ctx context.Context, id string) (*floor.Controller, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.control(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.floors, nil
}

// FloorsSaved returns once every floor change made in session id before the
// call is in the catalog: the API answers a floor primitive or a style
// change only then.
func (s *Service) FloorsSaved(ctx context.Context, id string) error {
	s.mu.Lock()
	c := s.ctl[id]
	s.mu.Unlock()
	if c == nil {
		return nil // over: its floors are gone, nothing to keep
	}
	return c.saver.wait(ctx)
}

// Join adds a member with a role to a session that is not over.
func (s *Service) Join(ctx context.Context, sessionID, name, role string) (Member, error) {
	if !floor.ValidRole(role) {
		return Member{}, fmt.Errorf("%w: role must be chair, participant or listener, not %q", ErrInvalid, role)
	}
	if len(name) > 200 {
		return Member{}, fmt.Errorf("%w: name is longer than 200 bytes", ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.control(ctx, sessionID)
	if err != nil {
		return Member{}, err
	}
	if s.o.MaxMembers > 0 && len(c.members) >= s.o.MaxMembers {
		return Member{}, fmt.Errorf("%w: the session has %d members (sessions.max_members)", ErrLimit, len(c.members))
	}
	m := catalog.Member{ID: newID("m_"), SessionID: sessionID, Name: name, Role: role, JoinedAt: s.o.Now().UTC()}
	if err := s.o.Catalog.AddMember(ctx, m); err != nil {
		return Member{}, wrapCatalog(err)
	}
	c.members[m.ID] = m
	c.floors.AddMember(m.ID, role, "")
	v := s.memberView(sessionID, m)
	s.publish(sessionID, event.MemberJoined, v)
	s.log.Info("member joined", "session", sessionID, "member", m.ID, "role", role)
	return v, nil
}

// Leave removes a member: its links are closed, its tokens passed on.
func (s *Service) Leave(ctx context.Context, sessionID, memberID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.memberControl(ctx, sessionID, memberID)
	if err != nil {
		return err
	}
	if ls := s.live[sessionID]; ls != nil {
		for id, l := range ls.links {
			if l.member == memberID {
				s.closeLink(l)
				c.gates.remove(id)
				delete(ls.links, id)
				_ = s.o.Catalog.RemoveLink(ctx, id)
				s.publish(sessionID, event.LinkRemoved, map[string]string{"id": id})
			}
		}
	}
	if err := s.o.Catalog.RemoveMember(ctx, memberID); err != nil {
		return wrapCatalog(err)
	}
	delete(c.members, memberID)
	c.floors.RemoveMember(memberID)
	s.publish(sessionID, event.MemberLeft, map[string]string{"id": memberID})
	s.log.Info("member left", "session", sessionID, "member", memberID)
	return nil
}

// GetMember returns one member.
func (s *Service) GetMember(ctx context.Context, sessionID, memberID string) (Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.control(ctx, sessionID)
	if err != nil {
		return Member{}, err
	}
	m, ok := c.members[memberID]
	if !ok {
		return Member{}, fmt.Errorf("%w: session %s has no member %s", ErrNotFound, sessionID, memberID)
	}
	return s.memberView(sessionID, m), nil
}

// Members lists a session's members in joining order.
func (s *Service) Members(ctx context.Context, sessionID string) ([]Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.control(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	out := []Member{}
	for _, m := range c.members {
		out = append(out, s.memberView(sessionID, m))
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].JoinedAt.Equal(out[j].JoinedAt) {
			return out[i].JoinedAt.Before(out[j].JoinedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func (s *Service) memberView(sessionID string, m catalog.Member) Member {
	v := Member{ID: m.ID, Name: m.Name, Role: m.Role, Subgroup: m.Subgroup, JoinedAt: m.JoinedAt, Links: []string{}}
	if ls := s.live[sessionID]; ls != nil {
		for _, l := range sortedLinks(ls.links) {
			if l.member == m.ID {
				v.Links = append(v.Links, l.rec.ID)
			}
		}
	}
	return v
}

// CreateSubgroup makes a private group inside a session and moves the
// listed members into it.
func (s *Service) CreateSubgroup(ctx context.Context, sessionID, name, by string, members []string) (Subgroup, error) {
	if len(name) > 200 {
		return Subgroup{}, fmt.Errorf("%w: name is longer than 200 bytes", ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.control(ctx, sessionID)
	if err != nil {
		return Subgroup{}, err
	}
	for _, m := range members {
		if _, ok := c.members[m]; !ok {
			return Subgroup{}, fmt.Errorf("%w: no member %q in session %s", ErrInvalid, m, sessionID)
		}
	}
	g := catalog.Subgroup{ID: newID("g_"), SessionID: sessionID, Name: name, CreatedBy: by, CreatedAt: s.o.Now().UTC()}
	if err := s.o.Catalog.AddSubgroup(ctx, g); err != nil {
		return Subgroup{}, wrapCatalog(err)
	}
	c.subgroups[g.ID] = g
	s.publish(sessionID, event.SubgroupCreated, map[string]any{"id": g.ID, "name": name, "created_by": by})
	for _, m := range members {
		if err := s.moveMember(ctx, sessionID, c, m, g.ID); err != nil {
			return Subgroup{}, err
		}
	}
	return s.subgroupView(c, g), nil
}

// SetSubgroup moves a member to a subgroup ("" = the main session).
func (s *Service) SetSubgroup(ctx context.Context, sessionID, memberID, group string) (Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.control(ctx, sessionID)
	if err != nil {
		return Member{}, err
	}
	if _, ok := c.members[memberID]; !ok {
		return Member{}, fmt.Errorf("%w: session %s has no member %s", ErrNotFound, sessionID, memberID)
	}
	if _, ok := c.subgroups[group]; !ok && group != "" {
		return Member{}, fmt.Errorf("%w: session %s has no subgroup %q", ErrInvalid, sessionID, group)
	}
	if err := s.moveMember(ctx, sessionID, c, memberID, group); err != nil {
		return Member{}, err
	}
	return s.memberView(sessionID, c.members[memberID]), nil
}

// moveMember is called with mu held.
func (s *Service) moveMember(ctx context.Context, sessionID string, c *control, memberID, group string) error {
	m := c.members[memberID]
	if m.Subgroup == group {
		return nil
	}
	if err := s.o.Catalog.SetMemberSubgroup(ctx, memberID, group); err != nil {
		return wrapCatalog(err)
	}
	s.regroup(sessionID, c, memberID, group)
	s.publish(sessionID, event.MemberUpdated, map[string]string{"id": memberID, "subgroup": group})
	return nil
}

// regroup moves a member and this node's links of it to a subgroup; mu is
// held.
func (s *Service) regroup(sessionID string, c *control, memberID, group string) {
	m := c.members[memberID]
	m.Subgroup = group
	c.members[memberID] = m
	c.floors.SetGroup(memberID, group)
	if ls := s.live[sessionID]; ls != nil {
		for id, l := range ls.links {
			if l.member == memberID {
				ls.room.SetGroup(id, group)
				if g, ok := l.media.(regrouper); ok {
					if err := g.SetGroup(group); err != nil {
						s.log.Warn("mixed link did not follow its member", "session", sessionID, "link", id, "err", err)
					}
				}
			}
		}
	}
}

// DeleteSubgroup removes a subgroup; its members return to the main session.
func (s *Service) DeleteSubgroup(ctx context.Context, sessionID, group string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.control(ctx, sessionID)
	if err != nil {
		return err
	}
	if _, ok := c.subgroups[group]; !ok {
		return fmt.Errorf("%w: session %s has no subgroup %q", ErrNotFound, sessionID, group)
	}
	for id, m := range c.members {
		if m.Subgroup == group {
			if err := s.moveMember(ctx, sessionID, c, id, ""); err != nil {
				return err
			}
		}
	}
	if err := s.o.Catalog.RemoveSubgroup(ctx, group); err != nil {
		return wrapCatalog(err)
	}
	delete(c.subgroups, group)
	s.publish(sessionID, event.SubgroupDeleted, map[string]string{"id": group})
	return nil
}

// Subgroups lists a session's subgroups.
func (s *Service) Subgroups(ctx context.Context, sessionID string) ([]Subgroup, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.control(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	out := []Subgroup{}
	for _, g := range c.subgroups {
		out = append(out, s.subgroupView(c, g))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (s *Service) subgroupView(c *control, g catalog.Subgroup) Subgroup {
	v := Subgroup{ID: g.ID, Name: g.Name, CreatedBy: g.CreatedBy, CreatedAt: g.CreatedAt, Members: []string{}}
	for id, m := range c.members {
		if m.Subgroup == g.ID {
			v.Members = append(v.Members, id)
		}
	}
	sort.Strings(v.Members)
	return v
}

// MemberRole returns a member's role, for the API's checks. In a cluster,
// a member this node does not know yet may have joined through another
// node (and been sent here by its over-capacity refusal): the catalog is
// asked, as for every other request naming such a member.
func (s *Service) MemberRole(ctx context.Context, sessionID, memberID string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.ctl[sessionID]
	if c == nil && s.o.Node != "" {
		c, _ = s.control(ctx, sessionID)
	}
	if c == nil {
		return "", false
	}
	m, ok := s.member(ctx, c, sessionID, memberID)
	return m.Role, ok
}

// loadControl rebuilds a session's control from the catalog at restore;
// mu is held.
func (s *Service) loadControl(ctx context.Context, id string) (*control, error) {
	saved, err := s.o.Catalog.FloorStates(ctx, id)
	if err != nil {
		return nil, err
	}
	c := s.newControl(id)
	gs, err := s.o.Catalog.ListSubgroups(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, g := range gs {
		c.subgroups[g.ID] = g
	}
	ms, err := s.o.Catalog.ListMembers(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		c.members[m.ID] = m
		c.floors.AddMember(m.ID, m.Role, m.Subgroup)
	}
	s.restoreFloors(id, c, saved)
	return c, nil
}

// SetMuted mutes (or unmutes) a member's tracks of kind on every plain
// link it has, whatever the floor says, and announces it (media.muted). A
// browser mutes its own tracks; this is for endpoints that cannot, such as
// a phone pressing *6.
func (s *Service) SetMuted(ctx context.Context, sessionID, memberID, kind string, muted bool) error {
	k, ok := media.ParseKind(kind)
	if !ok {
		return fmt.Errorf("%w: kind must be audio or video, not %q", ErrInvalid, kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.memberControl(ctx, sessionID, memberID)
	if err != nil {
		return err
	}
	if c.gates.mute(memberID, k, muted) {
		s.publish(sessionID, event.MediaMuted, map[string]any{"member": memberID, "kind": kind, "muted": muted})
	}
	return nil
}

// Muted reports whether a member muted its tracks of kind (SetMuted).
func (s *Service) Muted(ctx context.Context, sessionID, memberID, kind string) (bool, error) {
	k, ok := media.ParseKind(kind)
	if !ok {
		return false, fmt.Errorf("%w: kind must be audio or video, not %q", ErrInvalid, kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.control(ctx, sessionID)
	if err != nil {
		return false, err
	}
	return c.gates.isMuted(memberID, k), nil
}

// memberControl is the control of a session that has memberID; mu is held.
func (s *Service) memberControl(ctx context.Context, sessionID, memberID string) (*control, error) {
	c, err := s.control(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if _, ok := c.members[memberID]; !ok {
		return nil, fmt.Errorf("%w: session %s has no member %s", ErrNotFound, sessionID, memberID)
	}
	return c, nil
}
