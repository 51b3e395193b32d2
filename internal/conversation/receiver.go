package conversation

import (
	"errors"
	"slices"
	"time"
)

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
