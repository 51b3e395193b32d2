package floor

import (
	"strconv"
	"strings"
	"time"
)

// Restore puts back floors as States returned them before a restart: the
// style, auto, phase and silence, who holds which token, and the queue of
// waiting requests in order. Call it after AddMember for every member and
// before media flows; a holder or requester that is no longer a member is
// left out (its token stays free). Waiting requests keep their IDs; a
// holder's request gets a new one, as States does not show it. Nothing is
// emitted; the gates are told who may send.
func (c *Controller) Restore(states []State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range states {
		f := c.floors[st.Name]
		if f == nil || !ValidStyle(st.Style) || st.Style == StyleNone {
			continue
		}
		f.style, f.auto, f.phase = st.Style, st.Auto, st.Phase
		f.silence = DefaultSilence
		if s := time.Duration(st.SilenceMS) * time.Millisecond; s >= MinSilence && s <= MaxSilence {
			f.silence = s
		}
		for _, t := range st.Tokens {
			c.seen(t.ID)
			_, member := c.members[t.Holder]
			if t.Replica {
				if member && f.active[t.Holder] == nil {
					f.replicas[t.Holder] = &Token{ID: t.ID, Holder: t.Holder, Replica: true}
					c.restoreGranted(f, t.Holder, true, "")
				}
				continue
			}
			f.primary[t.Group] = &Token{ID: t.ID, Group: t.Group}
			if member && f.active[t.Holder] == nil {
				f.primary[t.Group].Holder = t.Holder
				c.restoreGranted(f, t.Holder, false, t.Group)
				f.sense[t.Group] = &sensing{holder: t.Holder, count: c.o.Activity(t.Holder, f.name), since: c.o.Now()}
			}
		}
		for _, q := range st.Queue {
			if _, ok := c.members[q.Member]; !ok || !q.Status.Waiting() || f.active[q.Member] != nil || c.reqs[q.ID] != nil {
				continue
			}
			c.seen(q.ID)
			r := &Request{ID: q.ID, Floor: f.name, Member: q.Member, Status: q.Status, Group: q.Group, Replica: q.Replica}
			f.active[r.Member] = r
			c.reqs[r.ID] = r
			f.queue = append(f.queue, r)
		}
		// The style's tokens, as SetStyle makes them, where none was saved.
		switch f.style {
		case StyleFloorControl, StyleActivity, StyleChalkboard:
			c.primaryOf(f, "")
		case StyleDiscussion:
			for _, g := range c.groups() {
				c.primaryOf(f, g)
			}
		}
		c.gate(f)
		if f.style == StyleActivity {
			c.startSensing()
		}
	}
}

func (c *Controller) restoreGranted(f *floorState, m string, replica bool, g string) {
	r := &Request{ID: c.id("r"), Floor: f.name, Member: m, Status: Granted, Group: g, Replica: replica}
	f.active[m] = r
	c.reqs[r.ID] = r
}

// seen keeps new IDs from repeating a restored one ("r12", "t7").
func (c *Controller) seen(id string) {
	n, err := strconv.ParseUint(strings.TrimLeft(id, "rt"), 10, 64)
	if err == nil && n > c.next {
		c.next = n
	}
}
