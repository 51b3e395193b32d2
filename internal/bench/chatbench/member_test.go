package chatbench

import (
	"testing"
	"time"

	"github.com/convene/convene/internal/chat"
	"github.com/convene/convene/internal/conversation"
)

// TestTake: a member's counts as messages come, one out of order: the
// held one's ordering time runs from its arrival to the delivery of both
// (a lower bound the sleep makes certain, not a timing), and a message of
// another step is ordered but not counted.
func TestTake(t *testing.T) {
	hello := chat.Hello{Conversation: 7, Self: 2, DeltaMS: 700, SkewMS: 100,
		Members: map[uint32]chat.Member{1: {ID: "a"}, 2: {ID: "b"}}}
	for _, f := range chat.Flows {
		hello.Flows = append(hello.Flows, chat.FlowView{ID: f.ID, Name: f.Name, DelayMS: f.Delay.Milliseconds(), LossDelayMS: f.LossDelay.Milliseconds()})
	}
	hello.Self = 1
	a, err := chat.ParticipantFor(hello)
	if err != nil {
		t.Fatal(err)
	}
	hello.Self = 2
	p, err := chat.ParticipantFor(hello)
	if err != nil {
		t.Fatal(err)
	}
	m := &member{p: p, arrived: map[conversation.Dep]time.Time{}}
	m.begin(5)
	t0 := time.Now()
	say := func(step uint16) conversation.Message {
		msg, err := a.Send(chat.FlowChat, Stamp{Step: step, Sent: t0}.AppendTo(nil, 20), t0)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	old, m1, m2 := say(4), say(5), say(5)
	m.take(old, time.Now())
	m.take(m2, time.Now())
	if c := m.snapshot(); c.received != 1 || c.delivered != 0 || len(m.arrived) != 1 {
		t.Fatalf("after the second, before the first: %+v, %d held", c, len(m.arrived))
	}
	time.Sleep(2 * time.Millisecond)
	m.take(m1, time.Now())
	c := m.snapshot()
	if c.received != 2 || c.delivered != 2 || c.order.n != 2 || len(m.arrived) != 0 || c.e2e.n != 2 {
		t.Fatalf("%+v, %d held", c, len(m.arrived))
	}
	if c.order.max < 2*time.Millisecond {
		t.Errorf("the held message's ordering time %v, want ≥ 2 ms (it arrived 2 ms before the one it follows)", c.order.max)
	}
}
