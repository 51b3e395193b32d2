package floor

import (
	"fmt"
)

// Token mechanics shared by the primitives and styles: requests move
// between statuses, primary and replica tokens are given and freed.

// newReq creates a request in status st and announces it.
func (c *Controller) newReq(f *floorState, m string, st Status, replica bool) *Request {
	r := &Request{ID: c.id("r"), Floor: f.name, Member: m, Status: st, Group: f.groupOf(c, m), Replica: replica}
	if !st.Final() {
		f.active[m] = r
		c.reqs[r.ID] = r
	}
	if st.Waiting() {
		f.queue = append(f.queue, r)
	}
	c.emitReq(f, r, true)
	return r
}

// newGranted creates a request that is granted at once (one event, not
// Pending then Granted): a replica, or group g's free primary token.
func (c *Controller) newGranted(f *floorState, m string, replica bool, g string) *Request {
	r := &Request{ID: c.id("r"), Floor: f.name, Member: m, Status: Granted, Group: g, Replica: replica}
	if replica {
		f.replicas[m] = &Token{ID: c.id("t"), Holder: m, Replica: true}
	} else {
		c.primaryOf(f, g).Holder = m
		f.sense[g] = &sensing{holder: m, count: c.o.Activity(m, f.name), since: c.o.Now()}
	}
	f.active[m] = r
	c.reqs[r.ID] = r
	c.emitReq(f, r, false)
	return r
}

// give grants `to` a token: its waiting request if it has one, else a new
// granted request.
func (c *Controller) give(f *floorState, to string, replica bool, g string) *Request {
	if r := f.active[to]; r != nil && r.Status.Waiting() {
		if replica {
			c.grantReplica(f, r)
		} else {
			r.Group = g
			c.grantPrimary(f, r)
		}
		return r
	}
	return c.newGranted(f, to, replica, g)
}

// move changes a request's status along the table and announces it.
func (c *Controller) move(f *floorState, r *Request, to Status) {
	if !CanMove(r.Status, to) {
		panic(fmt.Sprintf("floor: request %s cannot move from %s to %s", r.ID, r.Status, to))
	}
	wasWaiting := r.Status.Waiting()
	r.Status = to
	if wasWaiting && !to.Waiting() {
		for i, q := range f.queue {
			if q == r {
				f.queue = append(f.queue[:i:i], f.queue[i+1:]...)
				break
			}
		}
	}
	if to.Final() {
		if f.active[r.Member] == r {
			delete(f.active, r.Member)
		}
		delete(c.reqs, r.ID)
	}
	c.emitReq(f, r, false)
}

func (c *Controller) primaryOf(f *floorState, g string) *Token {
	t := f.primary[g]
	if t == nil {
		t = &Token{ID: c.id("t"), Group: g}
		f.primary[g] = t
	}
	return t
}

// grantPrimary gives the primary token of group g (free) to r.
func (c *Controller) grantPrimary(f *floorState, r *Request) {
	t := c.primaryOf(f, r.Group)
	t.Holder = r.Member
	r.Replica = false
	f.sense[r.Group] = &sensing{holder: r.Member, count: c.o.Activity(r.Member, f.name), since: c.o.Now()}
	c.move(f, r, Granted)
}

func (c *Controller) grantReplica(f *floorState, r *Request) {
	f.replicas[r.Member] = &Token{ID: c.id("t"), Holder: r.Member, Replica: true}
	r.Replica = true
	c.move(f, r, Granted)
}

// freePrimary takes group g's token from its holder (whose request ends in
// final) and passes it on: a token is never lost.
func (c *Controller) freePrimary(f *floorState, g string, final Status) {
	t := f.primary[g]
	if t == nil || t.Holder == "" {
		return
	}
	if r := f.active[t.Holder]; r != nil && r.Status == Granted && !r.Replica {
		c.move(f, r, final)
	}
	t.Holder = ""
	delete(f.sense, g)
	c.advance(f, g)
}

// advance grants a free primary token to the first Accepted request of g.
func (c *Controller) advance(f *floorState, g string) {
	t := f.primary[g]
	if t == nil || t.Holder != "" {
		return
	}
	for _, q := range f.queue {
		if q.Group == g && q.Status == Accepted {
			c.grantPrimary(f, q)
			return
		}
	}
}

func (c *Controller) dropReplica(f *floorState, m string, final Status) {
	if _, ok := f.replicas[m]; !ok {
		return
	}
	delete(f.replicas, m)
	if r := f.active[m]; r != nil && r.Status == Granted && r.Replica {
		c.move(f, r, final)
	}
}
