package floor

import (
	"fmt"
)

// The MCP token primitives (request, grant, deny, cancel, release,
// transfer, replicate, delete, distribute) with BFCP's request statuses.

// Request asks for a floor for member m. A listener's request is Denied.
func (c *Controller) Request(m, floor string) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return Request{}, err
	}
	mi, err := c.member(m)
	if err != nil {
		return Request{}, err
	}
	if mi.role == RoleListener {
		return *c.newReq(f, m, Denied, false), nil
	}
	if r := f.active[m]; r != nil {
		if r.Status == Granted {
			return Request{}, fmt.Errorf("%w: %s already holds the %s floor", ErrConflict, m, floor)
		}
		return c.view(f, r), nil
	}
	var r *Request
	switch f.style {
	case StyleNone:
		return Request{}, fmt.Errorf("%w: floor control is off for the %s floor", ErrConflict, floor)
	case StyleBrainstorming:
		r = c.newGranted(f, m, true, "")
	case StyleChalkboard:
		switch {
		case f.phase == 2:
			r = c.newGranted(f, m, true, "")
		case c.primaryOf(f, "").Holder == "" && (f.auto || mi.role == RoleChair):
			r = c.newGranted(f, m, false, "")
		default:
			r = c.newReq(f, m, Accepted, false)
		}
	default:
		g := f.groupOf(c, m)
		switch {
		case c.primaryOf(f, g).Holder == "" && (f.auto || mi.role == RoleChair):
			r = c.newGranted(f, m, false, g)
		case f.auto:
			r = c.newReq(f, m, Accepted, false)
		default:
			r = c.newReq(f, m, Pending, false)
		}
	}
	c.gate(f)
	return c.view(f, r), nil
}

func (c *Controller) view(f *floorState, r *Request) Request {
	v := *r
	if r.Status == Accepted {
		v.Position = f.position(r)
	}
	return v
}

func (c *Controller) waiting(id string) (*floorState, *Request, error) {
	r := c.reqs[id]
	if r == nil {
		return nil, nil, fmt.Errorf("%w: no waiting or granted request %q", ErrNotFound, id)
	}
	return c.floors[r.Floor], r, nil
}

// Grant grants a waiting request (by a chair): the token if it is free,
// otherwise a Pending request is Accepted into the queue.
func (c *Controller) Grant(by, reqID string) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.chair(by); err != nil {
		return Request{}, err
	}
	f, r, err := c.waiting(reqID)
	if err != nil {
		return Request{}, err
	}
	if !r.Status.Waiting() {
		return Request{}, fmt.Errorf("%w: request %s is %s", ErrConflict, r.ID, r.Status)
	}
	switch {
	case f.style == StyleBrainstorming || (f.style == StyleChalkboard && f.phase == 2):
		c.grantReplica(f, r)
	case c.primaryOf(f, r.Group).Holder == "":
		c.grantPrimary(f, r)
	case r.Status == Pending:
		c.move(f, r, Accepted)
	default:
		return Request{}, fmt.Errorf("%w: the %s floor is held by %s; it is queued at position %d",
			ErrConflict, f.name, f.primary[r.Group].Holder, f.position(r))
	}
	c.gate(f)
	return c.view(f, r), nil
}

// Deny refuses a waiting request (by a chair).
func (c *Controller) Deny(by, reqID string) (Request, error) {
	return c.end(by, reqID, Denied, true)
}

// Cancel withdraws a waiting request (by its member or a chair).
func (c *Controller) Cancel(by, reqID string) (Request, error) {
	return c.end(by, reqID, Cancelled, false)
}

func (c *Controller) end(by, reqID string, to Status, chairOnly bool) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, r, err := c.waiting(reqID)
	if err != nil {
		return Request{}, err
	}
	if chairOnly || r.Member != by {
		if err := c.chair(by); err != nil {
			return Request{}, err
		}
	}
	if !r.Status.Waiting() {
		return Request{}, fmt.Errorf("%w: request %s is %s", ErrConflict, r.ID, r.Status)
	}
	c.move(f, r, to)
	return c.view(f, r), nil
}

// Release gives back the token m holds on floor.
func (c *Controller) Release(m, floor string) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return Request{}, err
	}
	r := f.active[m]
	if r == nil || r.Status != Granted {
		return Request{}, fmt.Errorf("%w: %s does not hold the %s floor", ErrConflict, m, floor)
	}
	if r.Replica {
		c.dropReplica(f, m, Released)
	} else {
		c.freePrimary(f, r.Group, Released)
	}
	c.gate(f)
	return c.view(f, r), nil
}

// grantee checks that `to` may be given a token.
func (c *Controller) grantee(f *floorState, to string) error {
	mi, err := c.member(to)
	if err != nil {
		return err
	}
	if mi.role == RoleListener {
		return fmt.Errorf("%w: %s is a listener and can never hold a floor", ErrConflict, to)
	}
	if r := f.active[to]; r != nil && r.Status == Granted {
		return fmt.Errorf("%w: %s already holds the %s floor", ErrConflict, to, f.name)
	}
	return nil
}

// Transfer moves the token that `by` holds on floor to member `to`.
func (c *Controller) Transfer(by, floor, to string) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return Request{}, err
	}
	src := f.active[by]
	if src == nil || src.Status != Granted {
		return Request{}, fmt.Errorf("%w: %s does not hold the %s floor", ErrConflict, by, floor)
	}
	if !src.Replica && f.groupOf(c, to) != src.Group {
		return Request{}, fmt.Errorf("%w: %s is not in subgroup %q", ErrConflict, to, src.Group)
	}
	if err := c.grantee(f, to); err != nil {
		return Request{}, err
	}
	var r *Request
	if src.Replica {
		c.dropReplica(f, by, Released)
		r = c.give(f, to, true, "")
	} else {
		c.move(f, src, Released)
		f.primary[src.Group].Holder = ""
		r = c.give(f, to, false, src.Group)
	}
	c.gate(f)
	return c.view(f, r), nil
}

func (f *floorState) replicable() bool {
	return f.style == StyleBrainstorming || (f.style == StyleChalkboard && f.phase == 2)
}

// Replicate gives `to` a copy of a token of floor; `by` must hold one or
// be a chair. Only styles with several holders allow it.
func (c *Controller) Replicate(by, floor, to string) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return Request{}, err
	}
	if r := f.active[by]; (r == nil || r.Status != Granted) && c.chair(by) != nil {
		return Request{}, fmt.Errorf("%w: %s holds no token of the %s floor to copy", ErrForbidden, by, floor)
	}
	if !f.replicable() {
		return Request{}, fmt.Errorf("%w: style %s (phase %d) allows one holder; replicas are for brainstorming and chalkboard phase 2", ErrConflict, f.style, f.phase)
	}
	if err := c.grantee(f, to); err != nil {
		return Request{}, err
	}
	r := c.give(f, to, true, "")
	c.gate(f)
	return c.view(f, r), nil
}

// Delete destroys a token (by its holder or a chair). A replica is gone; a
// primary token is taken from its holder and passed on, never destroyed.
func (c *Controller) Delete(by, floor, tokenID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return err
	}
	final := Revoked
	for m, t := range f.replicas {
		if t.ID == tokenID {
			if m == by {
				final = Released
			} else if err := c.chair(by); err != nil {
				return err
			}
			c.dropReplica(f, m, final)
			c.gate(f)
			return nil
		}
	}
	for g, t := range f.primary {
		if t.ID != tokenID {
			continue
		}
		if t.Holder == "" {
			return fmt.Errorf("%w: token %s is free; a floor's own token is never destroyed", ErrConflict, tokenID)
		}
		if t.Holder == by {
			final = Released
		} else if err := c.chair(by); err != nil {
			return err
		}
		c.freePrimary(f, g, final)
		c.gate(f)
		return nil
	}
	return fmt.Errorf("%w: no token %q on the %s floor", ErrNotFound, tokenID, floor)
}

// Distribute hands out tokens (by a chair): replicas to the members listed
// (all non-listeners when none are) under brainstorming and chalkboard
// phase 2; under discussion groups, a token to every subgroup, each granted
// to the first in its queue.
func (c *Controller) Distribute(by, floor string, to []string) ([]Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.chair(by); err != nil {
		return nil, err
	}
	f, err := c.floor(floor)
	if err != nil {
		return nil, err
	}
	var out []Request
	switch {
	case f.style == StyleDiscussion:
		for _, g := range c.groups() {
			c.primaryOf(f, g)
			c.advance(f, g)
		}
	case f.replicable():
		if len(to) == 0 {
			to = c.speakers()
		}
		for _, m := range to {
			if r := f.active[m]; r != nil && r.Status == Granted {
				continue
			}
			if err := c.grantee(f, m); err != nil {
				return out, err
			}
			out = append(out, c.view(f, c.give(f, m, true, "")))
		}
	default:
		return nil, fmt.Errorf("%w: style %s does not distribute tokens", ErrConflict, f.style)
	}
	c.gate(f)
	return out, nil
}
