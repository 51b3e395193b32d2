package conversation

import (
	"testing"
	"time"
)

// TestGrowAndResume: a receiver made with two members takes a third's
// message after Grow; after Resume it waits for none of a sender's
// earlier messages; a participant resumed at 7 sends 8.
func TestGrowAndResume(t *testing.T) {
	c, err := New(Spec{ID: 1, Members: []string{"node", "a"}, Flows: []Flow{{ID: 1, Delay: 100 * time.Millisecond, LossDelay: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.Receiver(0)
	now := time.Unix(100, 0)
	m := Message{Conversation: 1, Flow: 1, Sender: 2, Seq: 5, Sent: now}
	if _, err := r.Receive(m, now); err != ErrMember {
		t.Fatalf("a third member before Grow: %v", err)
	}
	r.Grow(3)
	if r.Members() != 3 {
		t.Fatalf("%d members", r.Members())
	}
	r.Resume(2, 4)
	out, err := r.Receive(m, now)
	if err != nil || len(out) != 1 || out[0].Status != Delivered || len(out[0].Missing) != 0 {
		t.Fatalf("after Resume(2, 4) seq 5 goes at once: %+v %v", out, err)
	}
	r.Resume(2, 1) // backwards: nothing
	if out, _ := r.Receive(Message{Conversation: 1, Flow: 1, Sender: 2, Seq: 6, Sent: now}, now); len(out) != 1 {
		t.Fatalf("seq 6: %+v", out)
	}
	p, _ := c.Participant(1)
	p.ResumeSending(7)
	if msg, _ := p.Send(1, nil, now); msg.Seq != 8 || p.Seq() != 8 {
		t.Errorf("resumed at 7, sent %d", msg.Seq)
	}
}
