package conversation

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Status says how a message was delivered.
type Status uint8

const (
	// Delivered: in per-sender and Δ-causal order, before its deadline.
	Delivered Status = iota
	// Expired: held until its deadline, then delivered with Missing naming
	// what never came (the seed's exception).
	Expired
	// Overflow: forced out before its deadline because the receiver held
	// Spec.Buffer messages; Missing names what it lacked.
	Overflow
	// Late: arrived after its deadline (then in order, with Missing if its
	// dependencies had not come), or after it had been declared missing
	// (then out of order, after what depended on it).
	Late
)

var statusNames = [...]string{"delivered", "expired", "overflow", "late"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", s)
}

// Gap names missing messages: Member's sequence numbers First..Last.
type Gap struct {
	Member      MemberID
	First, Last uint64
}

// Delivery is a message handed to the application.
type Delivery struct {
	Message Message
	Status  Status
	Missing []Gap // what it depended on and was not delivered before it
}

// Errors of Receive: the message is dropped.
var (
	ErrConversation = errors.New("conversation: message of another conversation")
	ErrFlow         = errors.New("conversation: unknown flow")
	ErrMember       = errors.New("conversation: unknown member")
)

// maxGaps bounds the declared-missing ranges remembered per sender, so
// that a late arrival is told from a duplicate; older ranges are forgotten
// and their late arrivals then count as duplicates.
const maxGaps = 64

// Receiver orders one member's incoming messages of a conversation. It is
// not safe for concurrent use: one goroutine owns it.
type Receiver struct {
	c        *Conversation
	self     MemberID
	peers    []peer
	heads    heldHeap             // the head of each sender's queue (and stale entries)
	ready    heldHeap             // deliverable heads (and stale entries)
	blocked  map[MemberID][]*held // heads waiting for that member's next messages
	held     int
	dups     uint64
	forcing  []Dep               // messages being forced, to stop on cycles
	frontier map[MemberID]uint64 // delivered and not yet covered: the next context
}

type peer struct {
	next  uint64 // every seq below is delivered or declared missing
	queue []*held
	gaps  []Gap // declared missing and not arrived since
}

type held struct {
	m        Message
	deadline time.Time
	late     bool
	gone     bool // delivered
}

// Receiver returns the receiver of member self.
func (c *Conversation) Receiver(self MemberID) (*Receiver, error) {
	if int(self) >= len(c.spec.Members) {
		return nil, ErrMember
	}
	r := &Receiver{c: c, self: self, peers: make([]peer, len(c.spec.Members)),
		blocked: map[MemberID][]*held{}, frontier: map[MemberID]uint64{}}
	for i := range r.peers {
		r.peers[i].next = 1
	}
	return r, nil
}

// Held is the number of messages held back.
func (r *Receiver) Held() int { return r.held }

// Duplicates is the number of duplicates dropped.
func (r *Receiver) Duplicates() uint64 { return r.dups }

// NextDeadline is when Tick next has something to do: the earliest
// deadline of a held message.
func (r *Receiver) NextDeadline() (time.Time, bool) {
	h := r.earliest()
	if h == nil {
		return time.Time{}, false
	}
	return h.deadline, true
}

// Receive takes msg, arrived at now, and returns what is now deliverable,
// in order. The receiver keeps msg's Context and Payload until delivered.
// A message's deadline is min(Sent, now) + Δ.
func (r *Receiver) Receive(msg Message, now time.Time) ([]Delivery, error) {
	if err := r.check(&msg); err != nil {
		return nil, err
	}
	out := r.expire(now, false, nil)
	p := &r.peers[msg.Sender]
	switch {
	case msg.Seq < p.next:
		if p.takeGap(msg.Seq) {
			out = append(out, Delivery{Message: msg, Status: Late})
		} else {
			r.dups++
		}
	case p.find(msg.Seq) >= 0:
		r.dups++
	default:
		deadline := now
		if msg.Sent.Before(now) {
			deadline = msg.Sent
		}
		h := &held{m: msg, deadline: deadline.Add(r.c.delta), late: now.Sub(msg.Sent) > r.c.delta}
		p.insert(h)
		r.held++
		if p.queue[0] == h {
			r.heads.push(h)
			r.evaluate(h)
		}
		if h.late {
			out = r.force(h, Late, out)
		}
		out = r.drain(out)
		for r.held > r.c.buffer {
			out = r.drain(r.force(r.earliest(), Overflow, out))
		}
	}
	return r.expire(now, true, out), nil
}

// Tick delivers what reached its deadline by now, with exceptions.
func (r *Receiver) Tick(now time.Time) []Delivery { return r.expire(now, true, nil) }

func (r *Receiver) check(m *Message) error {
	if m.Conversation != r.c.spec.ID {
		return ErrConversation
	}
	if _, ok := r.c.flows[m.Flow]; !ok {
		return ErrFlow
	}
	n := MemberID(len(r.peers))
	if m.Sender >= n || m.Sender == r.self || m.Seq == 0 {
		return ErrMember
	}
	for i, d := range m.Context {
		if d.Member >= n || d.Member == m.Sender || (i > 0 && d.Member <= m.Context[i-1].Member) {
			return ErrContext
		}
	}
	return nil
}

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

// remove takes h out of its sender's queue if it is still there.
func (r *Receiver) remove(h *held) {
	p := &r.peers[h.m.Sender]
	i := p.find(h.m.Seq)
	if i < 0 || p.queue[i] != h {
		return
	}
	p.queue = slices.Delete(p.queue, i, i+1)
	r.held--
	if i == 0 && len(p.queue) > 0 {
		r.heads.push(p.queue[0])
		r.evaluate(p.queue[0])
	}
}

func (p *peer) find(seq uint64) int {
	i, ok := slices.BinarySearchFunc(p.queue, seq, func(h *held, s uint64) int {
		switch {
		case h.m.Seq < s:
			return -1
		case h.m.Seq > s:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

func (p *peer) insert(h *held) {
	i, _ := slices.BinarySearchFunc(p.queue, h.m.Seq, func(x *held, s uint64) int {
		if x.m.Seq < s {
			return -1
		}
		return 1
	})
	p.queue = slices.Insert(p.queue, i, h)
}

func (p *peer) addGap(g Gap) {
	if len(p.gaps) == maxGaps {
		p.gaps = slices.Delete(p.gaps, 0, 1)
	}
	p.gaps = append(p.gaps, g)
}

// takeGap reports whether seq was declared missing, and forgets it.
func (p *peer) takeGap(seq uint64) bool {
	for i, g := range p.gaps {
		if seq < g.First || seq > g.Last {
			continue
		}
		switch {
		case g.First == g.Last:
			p.gaps = slices.Delete(p.gaps, i, i+1)
		case seq == g.First:
			p.gaps[i].First++
		case seq == g.Last:
			p.gaps[i].Last--
		default:
			p.gaps[i].Last = seq - 1
			p.gaps = slices.Insert(p.gaps, i+1, Gap{g.Member, seq + 1, g.Last})
			if len(p.gaps) > maxGaps {
				p.gaps = slices.Delete(p.gaps, 0, 1)
			}
		}
		return true
	}
	return false
}
