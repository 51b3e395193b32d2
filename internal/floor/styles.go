package floor

import (
	"fmt"
	"sort"
	"time"

	"github.com/convene/convene/internal/event"
)

// Floor styles (none, floor control, brainstorming, chalkboard, discussion
// groups, activity sensing): switching a floor's style and the chalkboard's
// phases.

func (c *Controller) groups() []string {
	seen := map[string]bool{"": true}
	out := []string{""}
	for _, m := range c.members {
		if !seen[m.group] {
			seen[m.group] = true
			out = append(out, m.group)
		}
	}
	sort.Strings(out)
	return out
}

// speakers are the members that may hold a floor, sorted.
func (c *Controller) speakers() []string {
	var out []string
	for id, m := range c.members {
		if m.role != RoleListener {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// clear revokes every token of f and cancels every waiting request.
func (c *Controller) clear(f *floorState) {
	for _, q := range append([]*Request(nil), f.queue...) {
		c.move(f, q, Cancelled)
	}
	for m := range f.replicas {
		c.dropReplica(f, m, Revoked)
	}
	for g, t := range f.primary {
		if t.Holder != "" {
			if r := f.active[t.Holder]; r != nil && r.Status == Granted {
				c.move(f, r, Revoked)
			}
		}
		delete(f.primary, g)
	}
	f.sense = map[string]*sensing{}
}

// SetStyle switches a floor's style (by a chair): every token is revoked,
// every waiting request cancelled, and the new style's tokens made.
func (c *Controller) SetStyle(by, floor string, s Settings) (State, error) {
	if !ValidStyle(s.Style) {
		return State{}, fmt.Errorf("%w: style must be one of none, floor_control, brainstorming, chalkboard, discussion_groups, activity_sensing, not %q", ErrInvalid, s.Style)
	}
	silence := DefaultSilence
	if s.SilenceMS != 0 {
		silence = time.Duration(s.SilenceMS) * time.Millisecond
		if silence < MinSilence || silence > MaxSilence {
			return State{}, fmt.Errorf("%w: silence_ms must be 200..400", ErrInvalid)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.chair(by); err != nil {
		return State{}, err
	}
	f, err := c.floor(floor)
	if err != nil {
		return State{}, err
	}
	c.clear(f)
	f.style, f.auto, f.silence, f.phase = s.Style, s.Auto, silence, 0
	if f.style == StyleChalkboard {
		f.phase = 1
	}
	c.o.Emit(event.FloorStyle, styleEvent(c.state(f)))
	switch f.style {
	case StyleFloorControl, StyleActivity:
		c.primaryOf(f, "")
	case StyleChalkboard:
		c.primaryOf(f, "")
	case StyleDiscussion:
		for _, g := range c.groups() {
			c.primaryOf(f, g)
		}
	case StyleBrainstorming:
		for _, m := range c.speakers() {
			c.newGranted(f, m, true, "")
		}
	}
	st := c.state(f)
	c.gate(f)
	if f.style == StyleActivity {
		c.startSensing()
	}
	return st, nil
}

func styleEvent(st State) map[string]any {
	return map[string]any{"floor": st.Name, "style": st.Style, "auto": st.Auto, "phase": st.Phase, "silence_ms": st.SilenceMS}
}

// Advance moves a chalkboard floor to its next phase (by a chair or the
// speaker): phase 1 → 2 grants a replica to every questioner in the queue;
// phase 2 → 1 destroys every replica.
func (c *Controller) Advance(by, floor string) (State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return State{}, err
	}
	if f.style != StyleChalkboard {
		return State{}, fmt.Errorf("%w: the %s floor is %s, not chalkboard", ErrConflict, floor, f.style)
	}
	if t := f.primary[""]; t == nil || t.Holder != by || by == "" {
		if err := c.chair(by); err != nil {
			return State{}, err
		}
	}
	if f.phase == 1 {
		f.phase = 2
		for _, q := range append([]*Request(nil), f.queue...) {
			c.grantReplica(f, q)
		}
	} else {
		f.phase = 1
		for m := range f.replicas {
			c.dropReplica(f, m, Revoked)
		}
	}
	st := c.state(f)
	c.o.Emit(event.FloorStyle, styleEvent(st))
	c.gate(f)
	return st, nil
}
