package floor

import "time"

// startSensing runs the activity-sensing loop if it is not running; mu is
// held.
func (c *Controller) startSensing() {
	if c.sensing || c.closed {
		return
	}
	c.sensing = true
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.senseLoop(c.stop, c.done)
}

func (c *Controller) senseLoop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(c.o.Tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			c.Sense()
		}
	}
}

// Sense looks once at every activity-sensing floor: a holder whose track
// has published nothing for the floor's silence, while someone waits, loses
// the token (Revoked) to the first waiting requester. The loop calls it
// every Options.Tick; tests call it directly.
func (c *Controller) Sense() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.o.Now()
	for _, n := range Floors {
		f := c.floors[n]
		if f.style != StyleActivity {
			continue
		}
		for g, t := range f.primary {
			if t.Holder == "" {
				continue
			}
			s := f.sense[g]
			cnt := c.o.Activity(t.Holder, f.name)
			if s == nil || s.holder != t.Holder {
				f.sense[g] = &sensing{holder: t.Holder, count: cnt, since: now}
				continue
			}
			if cnt != s.count {
				s.count, s.since = cnt, now
				continue
			}
			if now.Sub(s.since) < f.silence || !f.hasAccepted(g) {
				continue
			}
			c.freePrimary(f, g, Revoked)
			c.gate(f)
		}
	}
}

func (f *floorState) hasAccepted(g string) bool {
	for _, q := range f.queue {
		if q.Group == g && q.Status == Accepted {
			return true
		}
	}
	return false
}
