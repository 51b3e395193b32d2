package conversation

import "time"

// The order: what a Receiver delivers when, and what it declares missing.

// expire forces, earliest first, the held messages whose deadline is
// before now (or at now, if inclusive).
func (r *Receiver) expire(now time.Time, inclusive bool, out []Delivery) []Delivery {
	for {
		h := r.earliest()
		if h == nil || h.deadline.After(now) || (!inclusive && h.deadline.Equal(now)) {
			return out
		}
		out = r.drain(r.force(h, Expired, out))
	}
}

// earliest is the held head of a sender queue with the earliest deadline
// (then the lowest sender).
func (r *Receiver) earliest() *held {
	for len(r.heads) > 0 {
		h := r.heads[0]
		if r.isHead(h) {
			return h
		}
		r.heads.pop()
	}
	return nil
}

func (r *Receiver) isHead(h *held) bool {
	q := r.peers[h.m.Sender].queue
	return !h.gone && len(q) > 0 && q[0] == h
}

// evaluate files head h as ready, or as blocked on what it waits for
// (its own sender's next message: nothing to file, the sender's advance
// evaluates its head).
func (r *Receiver) evaluate(h *held) {
	if h.m.Seq != r.peers[h.m.Sender].next {
		return
	}
	for _, d := range h.m.Context {
		if d.Member != r.self && r.peers[d.Member].next <= d.Seq {
			r.blocked[d.Member] = append(r.blocked[d.Member], h)
			return
		}
	}
	r.ready.push(h)
}

// advanced re-evaluates what may wait for member m after its next moved.
func (r *Receiver) advanced(m MemberID) {
	if q := r.peers[m].queue; len(q) > 0 {
		r.evaluate(q[0])
	}
	hs := r.blocked[m]
	delete(r.blocked, m)
	for _, h := range hs {
		if r.isHead(h) {
			r.evaluate(h)
		}
	}
}

func before(a, b *held) bool {
	if !a.deadline.Equal(b.deadline) {
		return a.deadline.Before(b.deadline)
	}
	return a.m.Sender < b.m.Sender
}

// drain delivers, earliest deadline first, every head whose predecessor
// and dependencies are delivered.
func (r *Receiver) drain(out []Delivery) []Delivery {
	for len(r.ready) > 0 {
		h := r.ready.pop()
		if !r.isHead(h) || h.m.Seq != r.peers[h.m.Sender].next {
			continue
		}
		if !r.satisfied(&h.m) {
			r.evaluate(h)
			continue
		}
		st := Delivered
		if h.late {
			st = Late
		}
		out = r.deliver(h, st, nil, out)
	}
	return out
}

func (r *Receiver) satisfied(m *Message) bool {
	for _, d := range m.Context {
		if d.Member != r.self && r.peers[d.Member].next <= d.Seq {
			return false
		}
	}
	return true
}

// force delivers h now: first the held messages it depends on (forced in
// turn), declaring missing the ones that never came.
func (r *Receiver) force(h *held, st Status, out []Delivery) []Delivery {
	r.remove(h)
	r.forcing = append(r.forcing, Dep{h.m.Sender, h.m.Seq})
	nested := st
	if nested == Late {
		nested = Expired
	}
	var missing []Gap
	own := false
	resolve := func(d Dep) {
		p := &r.peers[d.Member]
		for p.next <= d.Seq {
			if len(p.queue) > 0 && p.queue[0].m.Seq == p.next {
				out = r.force(p.queue[0], nested, out)
				continue
			}
			last := d.Seq
			if len(p.queue) > 0 && p.queue[0].m.Seq <= last {
				last = p.queue[0].m.Seq - 1
			}
			for _, f := range r.forcing {
				if f.Member == d.Member && f.Seq >= p.next && f.Seq <= last {
					return // a cycle: only a forged context makes one
				}
			}
			g := Gap{d.Member, p.next, last}
			missing = append(missing, g)
			p.addGap(g)
			p.next = last + 1
			r.advanced(d.Member)
		}
	}
	for _, d := range h.m.Context {
		if !own && h.m.Sender < d.Member {
			own = true
			resolve(Dep{h.m.Sender, h.m.Seq - 1})
		}
		if d.Member != r.self {
			resolve(d)
		}
	}
	if !own {
		resolve(Dep{h.m.Sender, h.m.Seq - 1})
	}
	r.forcing = r.forcing[:len(r.forcing)-1]
	if h.late {
		st = Late
	}
	return r.deliver(h, st, missing, out)
}

func (r *Receiver) deliver(h *held, st Status, missing []Gap, out []Delivery) []Delivery {
	r.remove(h)
	h.gone = true
	p := &r.peers[h.m.Sender]
	p.next = max(p.next, h.m.Seq+1)
	r.advanced(h.m.Sender)
	for _, d := range h.m.Context {
		if q, ok := r.frontier[d.Member]; ok && q <= d.Seq {
			delete(r.frontier, d.Member)
		}
	}
	r.frontier[h.m.Sender] = max(r.frontier[h.m.Sender], h.m.Seq)
	return append(out, Delivery{Message: h.m, Status: st, Missing: missing})
}
