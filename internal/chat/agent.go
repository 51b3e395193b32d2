package chat

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/convene/convene/internal/conversation"
)

// Agent is the node taking part in a conversation for an endpoint that
// cannot (a SIP phone): it orders what arrives as a member's client would
// (package conversation: per sender, Δ-causal, deadlines) and hands each
// chat line to Deliver; Say sends a line in the member's name.
type Agent struct {
	c       *Conn
	deliver func(from, text string)
	cancel  context.CancelFunc
	done    chan struct{}

	mu     sync.Mutex // guards p, names and notesT: Say and the run loop
	p      *conversation.Participant
	names  map[uint32]string
	notesT int64 // the greatest stamp of the notes seen (notes.go)
}

// AttachAgent joins member to its session's conversation on behalf of an
// endpoint; deliver gets each chat line delivered to it, in order, from
// the agent's goroutine (from is the sender's name; "" for a notice of
// messages that never came). Close ends it.
func (s *Service) AttachAgent(ctx context.Context, sessionID, memberID, name string, deliver func(from, text string)) (*Agent, error) {
	c, err := s.Attach(ctx, sessionID, memberID, name)
	if err != nil {
		return nil, err
	}
	b, _, ok := c.Next(ctx)
	var h Hello
	if !ok || json.Unmarshal(b, &h) != nil || h.Type != "hello" {
		c.Close()
		return nil, fmt.Errorf("chat: agent for %s: no hello", memberID)
	}
	p, err := ParticipantFor(h)
	if err != nil {
		c.Close()
		return nil, err
	}
	actx, cancel := context.WithCancel(context.Background())
	a := &Agent{c: c, deliver: deliver, cancel: cancel, done: make(chan struct{}), p: p, names: map[uint32]string{}}
	for n, m := range h.Members {
		a.names[n] = m.Name
	}
	for _, s := range h.History {
		var m conversation.Message
		if b, err := base64.StdEncoding.DecodeString(s); err == nil && conversation.Unmarshal(b, &m) == nil {
			if t, ok := notesT(m.Flow, m.Payload); ok {
				a.notesT = max(a.notesT, t)
			}
		}
	}
	go a.run(actx)
	return a, nil
}

// ParticipantFor makes the member's side of the conversation a hello
// describes, resumed after what it already holds: its own last message,
// and every sender's last one (the history is shown as it is, not
// awaited).
func ParticipantFor(h Hello) (*conversation.Participant, error) {
	n := int(h.Self) + 1
	for k := range h.Members {
		n = max(n, int(k)+1)
	}
	members := make([]string, n)
	for k, m := range h.Members {
		members[k] = m.ID
	}
	flows := make([]conversation.Flow, 0, len(h.Flows))
	for _, f := range h.Flows {
		flows = append(flows, conversation.Flow{ID: f.ID, Name: f.Name, Delay: time.Duration(f.DelayMS) * time.Millisecond,
			LossDelay: time.Duration(f.LossDelayMS) * time.Millisecond})
	}
	conv, err := conversation.New(conversation.Spec{ID: h.Conversation, Members: members, Flows: flows,
		Skew: time.Duration(h.SkewMS) * time.Millisecond, Delta: time.Duration(h.DeltaMS) * time.Millisecond})
	if err != nil {
		return nil, err
	}
	p, err := conv.Participant(conversation.MemberID(h.Self))
	if err != nil {
		return nil, err
	}
	p.ResumeSending(h.Last[h.Self])
	for k, seq := range h.Last {
		p.Resume(conversation.MemberID(k), seq)
	}
	return p, nil
}

func (a *Agent) run(ctx context.Context) {
	defer close(a.done)
	frames := make(chan []byte)
	go func() { // the Conn's frames, binary ones marked by a leading 1
		defer close(frames)
		for {
			b, bin, ok := a.c.Next(ctx)
			if !ok {
				return
			}
			tag := byte(0)
			if bin {
				tag = 1
			}
			select {
			case frames <- append([]byte{tag}, b...):
			case <-ctx.Done():
				return
			}
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var ds []conversation.Delivery
		select {
		case f, ok := <-frames:
			if !ok {
				return
			}
			ds = a.frame(f)
		case <-timer.C:
			a.mu.Lock()
			ds = a.p.Tick(time.Now())
			a.mu.Unlock()
		}
		a.hand(ds)
		a.mu.Lock()
		next, ok := a.p.NextDeadline()
		a.mu.Unlock()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if ok {
			timer.Reset(max(time.Until(next), 0) + time.Millisecond)
		} else {
			timer.Reset(time.Hour)
		}
	}
}

// frame takes one frame of the Conn: a message, or a member's number.
func (a *Agent) frame(f []byte) []conversation.Delivery {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f[0] == 0 {
		var m MemberFrame
		if json.Unmarshal(f[1:], &m) == nil && m.Type == "member" {
			a.names[m.N] = m.Name
			a.p.Grow(int(m.N) + 1)
		}
		return nil
	}
	var m conversation.Message
	if conversation.Unmarshal(f[1:], &m) != nil {
		return nil
	}
	a.p.Grow(int(m.Sender) + 1)
	for _, d := range m.Context {
		a.p.Grow(int(d.Member) + 1)
	}
	ds, err := a.p.Receive(m, time.Now())
	if err != nil {
		return nil
	}
	return ds
}

// hand passes delivered chat lines on, and says where some never came.
func (a *Agent) hand(ds []conversation.Delivery) {
	for _, d := range ds {
		a.mu.Lock()
		if t, ok := notesT(d.Message.Flow, d.Message.Payload); ok {
			a.notesT = max(a.notesT, t)
		}
		from := a.names[uint32(d.Message.Sender)]
		var gaps []string
		for _, g := range d.Missing {
			gaps = append(gaps, fmt.Sprintf("%d message(s) from %s never arrived", g.Last-g.First+1, a.names[uint32(g.Member)]))
		}
		a.mu.Unlock()
		for _, g := range gaps {
			a.deliver("", g)
		}
		if d.Message.Flow == FlowChat {
			a.deliver(from, string(d.Message.Payload))
		}
	}
}

// Say sends text in the member's name, through the same checks as a
// socket's message.
func (a *Agent) Say(text string) error {
	a.mu.Lock() // also serializes the Conn's rate bucket, which take uses
	defer a.mu.Unlock()
	m, err := a.p.Send(FlowChat, []byte(text), time.Now())
	if err != nil {
		return err
	}
	return a.c.take(m.Marshal())
}

// Close leaves the conversation.
func (a *Agent) Close() {
	a.cancel()
	a.c.Close()
	<-a.done
}
