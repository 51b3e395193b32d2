package relay

import "time"

// sweep ends calls whose media stopped: every tick it compares each call's
// packet count with the last tick's, and deletes a call whose count has not
// moved for Options.Timeout (counting from its creation if media never
// started).
func (r *Relay) sweep() {
	every := min(max(r.o.Timeout/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.doneCh:
			return
		case <-t.C:
			r.expire(r.o.clock())
		}
	}
}

func (r *Relay) expire(now time.Time) {
	r.kpoll()
	r.mu.Lock()
	var ended []string
	for id, c := range r.calls {
		p := c.packets.Load()
		if c.lastMove.IsZero() || p != c.seen {
			c.seen, c.lastMove = p, now
			continue
		}
		if now.Sub(c.lastMove) >= r.o.Timeout {
			delete(r.calls, id)
			r.release(c)
			r.st.timeouts.Add(1)
			ended = append(ended, id)
		}
	}
	r.mu.Unlock()
	for _, id := range ended {
		r.log.Info("call ended: no media for the timeout", "call_id", id, "timeout", r.o.Timeout)
	}
}
