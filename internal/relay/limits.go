package relay

import "fmt"

// Caps a refused offer hit, the label values of
// convene_relay_limit_refusals_total.
const (
	capCall = iota
	capUser
	capSource
	numCaps
)

var capNames = [numCaps]string{"call", "user", "source"}

// admit reports whether c may take n more streams; if not it counts the
// refusal and returns an error wrapping ErrLimit. r.mu is held.
func (r *Relay) admit(c *call, n int) error {
	if n == 0 {
		return nil
	}
	cp, have, limit := -1, 0, 0
	switch {
	case c.held+n > r.o.MaxStreamsPerCall:
		cp, have, limit = capCall, c.held, r.o.MaxStreamsPerCall
	case c.user != "" && r.users[c.user]+n > r.o.MaxStreamsPerUser:
		cp, have, limit = capUser, r.users[c.user], r.o.MaxStreamsPerUser
	case c.source.IsValid() && r.sources[c.source]+n > r.o.MaxStreamsPerSource:
		cp, have, limit = capSource, r.sources[c.source], r.o.MaxStreamsPerSource
	default:
		return nil
	}
	r.st.limited[cp].Add(1)
	r.log.Warn("offer refused: stream cap", "call_id", c.id, "cap", capNames[cp], "user", c.user,
		"source", c.source, "held", have, "wanted", n, "max", limit)
	return fmt.Errorf("%w: %d more streams for the %s, which holds %d of at most %d", ErrLimit, n, capNames[cp], have, limit)
}

// charge adds n streams (negative: releases them) to c and to its user's
// and source's totals. r.mu is held.
func (r *Relay) charge(c *call, n int) {
	c.held += n
	if c.user != "" {
		if r.users[c.user] += n; r.users[c.user] <= 0 {
			delete(r.users, c.user)
		}
	}
	if c.source.IsValid() {
		if r.sources[c.source] += n; r.sources[c.source] <= 0 {
			delete(r.sources, c.source)
		}
	}
}
