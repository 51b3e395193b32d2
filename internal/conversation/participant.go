package conversation

import (
	"slices"
	"time"
)

// Participant is a member that sends as well as receives: its messages
// carry, as their context, what its Receiver delivered since its previous
// message and no later delivery depends on (the direct dependencies).
type Participant struct {
	*Receiver
	seq uint64
}

// Participant returns member self's sender and receiver.
func (c *Conversation) Participant(self MemberID) (*Participant, error) {
	r, err := c.Receiver(self)
	if err != nil {
		return nil, err
	}
	return &Participant{Receiver: r}, nil
}

// Send stamps payload as the participant's next message on flow, sent at
// now. The message shares one sequence space across the flows.
func (p *Participant) Send(flow uint32, payload []byte, now time.Time) (Message, error) {
	if _, ok := p.c.flows[flow]; !ok {
		return Message{}, ErrFlow
	}
	ctx := make([]Dep, 0, len(p.frontier))
	for m, s := range p.frontier {
		ctx = append(ctx, Dep{m, s})
	}
	slices.SortFunc(ctx, func(a, b Dep) int { return int(a.Member) - int(b.Member) })
	clear(p.frontier)
	p.seq++
	return Message{Conversation: p.c.spec.ID, Flow: flow, Sender: p.self, Seq: p.seq,
		Sent: time.UnixMilli(now.UnixMilli()), Context: ctx, Payload: payload}, nil
}
