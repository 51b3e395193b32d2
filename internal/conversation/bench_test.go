package conversation

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkContextSize prints the bytes of context per message against
// members, for the encoding used (direct dependencies since the sender's
// previous message) and for two others it was chosen against: the full
// vector of what the sender had delivered from everyone, and the entries of
// that vector changed since the sender's previous message. The network
// delays each message 20–500 ms, loses nothing, and either carries a chat
// (20 messages/s across the conversation) or a busy whiteboard (200
// messages/s): what grows the context is how many messages are in flight
// at once, not how many members there are. Run: go test -run - -bench ContextSize -benchtime 1x
func BenchmarkContextSize(b *testing.B) {
	for _, load := range []struct {
		name     string
		interval func(members int) time.Duration
		duration time.Duration
	}{
		{"chat", func(n int) time.Duration { return time.Duration(n) * time.Second / 20 }, 100 * time.Second},
		{"busy", func(n int) time.Duration { return time.Duration(n) * time.Second / 200 }, 10 * time.Second},
	} {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/members=%d", load.name, n), func(b *testing.B) {
				for b.Loop() {
					benchContext(b, n, load.interval(n), load.duration)
				}
			})
		}
	}
}

func benchContext(b *testing.B, n int, interval, duration time.Duration) {
	s := newSim(b, simConfig{
		members: n, spec: Spec{ID: 1, Flows: seedFlows, Skew: 25 * time.Millisecond, Delta: 250 * time.Millisecond},
		duration: duration, interval: interval,
		minDelay: 20 * time.Millisecond, maxDelay: 500 * time.Millisecond, seed: 3,
	})
	prev := make([][]uint64, n)
	var ctx, full, changed, header, msgs int
	s.onSend = func(sm *simMsg) {
		m := &sm.m
		msgs++
		ctx += m.ContextSize()
		header += len(m.Marshal())
		who := int(m.Sender)
		p := s.ps[who]
		vec := make([]uint64, n)
		var fv, cv []Dep
		for i := range n {
			vec[i] = p.peers[i].next - 1
			if i == who || vec[i] == 0 {
				continue
			}
			fv = append(fv, Dep{MemberID(i), vec[i]})
			if prev[who] == nil || prev[who][i] != vec[i] {
				cv = append(cv, Dep{MemberID(i), vec[i]})
			}
		}
		prev[who] = vec
		full += (&Message{Context: fv}).ContextSize()
		changed += (&Message{Context: cv}).ContextSize()
	}
	s.run(b)
	if msgs == 0 {
		b.Fatal("no messages")
	}
	b.ReportMetric(float64(ctx)/float64(msgs), "ctx-B/msg")
	b.ReportMetric(float64(changed)/float64(msgs), "changed-B/msg")
	b.ReportMetric(float64(full)/float64(msgs), "full-B/msg")
	b.ReportMetric(float64(header)/float64(msgs), "header-B/msg")
	b.ReportMetric(float64(msgs), "msgs")
}

// BenchmarkReceive decodes and orders messages from 10 senders, every
// fourth arriving before the one it follows: ns and allocations per
// message through Unmarshal and Receive.
func BenchmarkReceive(b *testing.B) {
	c, err := New(Spec{ID: 1, Members: make([]string, 11), Flows: seedFlows, Skew: 25 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	senders := make([]*Participant, 10)
	for i := range senders {
		senders[i], _ = c.Participant(MemberID(i))
	}
	var wires [][]byte
	now := simEpoch
	for i := range 4096 {
		s := senders[i%10]
		m, _ := s.Send(uint32(1+i%3), []byte("hello"), now)
		// the next sender has seen it: a chain through everyone
		if _, err := senders[(i+1)%10].Receive(m, now); err != nil {
			b.Fatal(err)
		}
		wires = append(wires, m.Marshal())
		now = now.Add(time.Millisecond)
	}
	for i := 0; i+1 < len(wires); i += 4 {
		wires[i], wires[i+1] = wires[i+1], wires[i]
	}
	b.ReportAllocs()
	b.ResetTimer()
	var r *Receiver
	var m Message
	for i := 0; b.Loop(); i++ {
		if i%len(wires) == 0 {
			r, _ = c.Receiver(10)
		}
		if err := Unmarshal(wires[i%len(wires)], &m); err != nil {
			b.Fatal(err)
		}
		m.Context = append([]Dep(nil), m.Context...) // the receiver keeps it
		if _, err := r.Receive(m, simEpoch.Add(time.Duration(i%len(wires))*time.Millisecond)); err != nil {
			b.Fatal(err)
		}
	}
}
