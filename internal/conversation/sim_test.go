package conversation

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

// sim runs the seed's workload on a fake clock: members send on the flows
// at random, each message reaches each other member after a random delay
// or is lost, and each receiver is ticked exactly at its next deadline.
type sim struct {
	cfg    simConfig
	c      *Conversation
	ps     []*Participant
	rng    *rand.Rand
	q      eventQueue
	msgs   []*simMsg
	now    time.Time
	ticks  []time.Time // per receiver: the tick last scheduled
	onSend func(*simMsg)
	// onEvent sees each arrival and tick before the receiver does.
	onEvent func(e event)
	// onDeliver sees each delivery at receiver r.
	onDeliver func(r int, now time.Time, d Delivery)
}

type simConfig struct {
	members    int
	spec       Spec // Members filled in
	duration   time.Duration
	interval   time.Duration // a member's mean time between sends
	minDelay   time.Duration
	maxDelay   time.Duration
	loss       float64
	dup        float64 // chance that an arrival comes twice
	seed       uint64
	fullVector bool // keep each message's full causal watermark (for checks)
}

type simMsg struct {
	m       Message
	vc      []uint64    // what the sender had resolved from each member
	arrival []time.Time // per receiver; zero if lost
	got     []bool      // per receiver: arrived and given to it
}

type event struct {
	at   time.Time
	n    int
	kind int // 0 send, 1 arrive, 2 tick
	who  int
	msg  *simMsg
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].n < q[j].n
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

var simEpoch = time.UnixMilli(1_700_000_000_000)

func newSim(tb testing.TB, cfg simConfig) *sim {
	spec := cfg.spec
	if len(spec.Members) == 0 {
		spec.Members = make([]string, cfg.members)
	}
	for i := range spec.Members {
		if spec.Members[i] != "" {
			continue
		}
		spec.Members[i] = string(rune('A'+i%26)) + string(rune('0'+i/26%10)) + string(rune('0'+i/260))
	}
	c, err := New(spec)
	if err != nil {
		tb.Fatal(err)
	}
	s := &sim{cfg: cfg, c: c, rng: rand.New(rand.NewPCG(cfg.seed, 17)), now: simEpoch,
		ticks: make([]time.Time, cfg.members)}
	for i := range cfg.members {
		p, err := c.Participant(MemberID(i))
		if err != nil {
			tb.Fatal(err)
		}
		s.ps = append(s.ps, p)
		s.push(event{at: s.now.Add(s.jitter(2 * cfg.interval)), kind: 0, who: i})
	}
	return s
}

func (s *sim) jitter(max time.Duration) time.Duration {
	return time.Duration(s.rng.Int64N(int64(max/time.Millisecond)+1)) * time.Millisecond
}

func (s *sim) push(e event) {
	e.n = len(s.q) + int(s.rng.Uint32()>>1)
	heap.Push(&s.q, e)
}

func (s *sim) run(tb testing.TB) {
	end := simEpoch.Add(s.cfg.duration)
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(event)
		s.now = e.at
		if s.onEvent != nil && e.kind != 0 {
			s.onEvent(e)
		}
		switch e.kind {
		case 0:
			if s.now.After(end) {
				continue
			}
			s.send(tb, e.who)
			s.push(event{at: s.now.Add(s.jitter(2 * s.cfg.interval)), kind: 0, who: e.who})
		case 1:
			e.msg.got[e.who] = true
			var m Message
			if err := Unmarshal(e.msg.m.Marshal(), &m); err != nil {
				tb.Fatal(err)
			}
			ds, err := s.ps[e.who].Receive(m, s.now)
			if err != nil {
				tb.Fatal(err)
			}
			s.deliver(e.who, ds)
		case 2:
			s.deliver(e.who, s.ps[e.who].Tick(s.now))
		}
	}
}

func (s *sim) deliver(r int, ds []Delivery) {
	for _, d := range ds {
		if s.onDeliver != nil {
			s.onDeliver(r, s.now, d)
		}
	}
	if at, ok := s.ps[r].NextDeadline(); ok && !at.Equal(s.ticks[r]) {
		s.ticks[r] = at
		s.push(event{at: at, kind: 2, who: r})
	}
}

func (s *sim) send(tb testing.TB, who int) {
	p := s.ps[who]
	flow := s.cfg.spec.Flows[s.rng.IntN(len(s.cfg.spec.Flows))].ID
	m, err := p.Send(flow, nil, s.now)
	if err != nil {
		tb.Fatal(err)
	}
	sm := &simMsg{m: m, arrival: make([]time.Time, s.cfg.members), got: make([]bool, s.cfg.members)}
	if s.cfg.fullVector {
		sm.vc = make([]uint64, s.cfg.members)
		for i := range sm.vc {
			sm.vc[i] = p.peers[i].next - 1
		}
		sm.vc[who] = m.Seq - 1
	}
	s.msgs = append(s.msgs, sm)
	for r := range s.cfg.members {
		if r == who || s.rng.Float64() < s.cfg.loss {
			continue
		}
		d := s.cfg.minDelay + s.jitter(s.cfg.maxDelay-s.cfg.minDelay)
		sm.arrival[r] = s.now.Add(d)
		s.push(event{at: sm.arrival[r], kind: 1, who: r, msg: sm})
		if s.rng.Float64() < s.cfg.dup {
			s.push(event{at: sm.arrival[r].Add(s.jitter(s.cfg.maxDelay)), kind: 1, who: r, msg: sm})
		}
	}
	if s.onSend != nil {
		s.onSend(sm)
	}
}
