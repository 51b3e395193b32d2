package conversation

import (
	"testing"
	"time"
)

var seedFlows = []Flow{
	{ID: 1, Name: "file", Delay: 150 * time.Millisecond, LossDelay: 400 * time.Millisecond},
	{ID: 2, Name: "audio", Delay: 100 * time.Millisecond, LossDelay: 300 * time.Millisecond},
	{ID: 3, Name: "mtalk", Delay: 150 * time.Millisecond, LossDelay: 500 * time.Millisecond},
}

// TestWorkloadSeed is the seed's Δ-causality test: three flows, about 1 %
// of packets dropped, end-to-end delay between 20 and 500 ms, Δ = 200 ms.
// Most messages then arrive after their deadline and must be reported late.
func TestWorkloadSeed(t *testing.T) {
	checkWorkload(t, simConfig{
		members: 10, spec: Spec{ID: 1, Flows: seedFlows, Skew: 25 * time.Millisecond},
		duration: time.Minute, interval: time.Second,
		minDelay: 20 * time.Millisecond, maxDelay: 500 * time.Millisecond, loss: 0.01, seed: 1,
	}, false)
}

// TestWorkloadWithinDelta has the same loss and delays with Δ = 500 ms:
// nothing is late, and exceptions name only lost messages.
func TestWorkloadWithinDelta(t *testing.T) {
	flows := []Flow{
		{ID: 1, Name: "chat", Delay: 450 * time.Millisecond, LossDelay: 800 * time.Millisecond},
		{ID: 2, Name: "strokes", Delay: 400 * time.Millisecond, LossDelay: 900 * time.Millisecond},
	}
	checkWorkload(t, simConfig{
		members: 12, spec: Spec{ID: 2, Flows: flows, Skew: 25 * time.Millisecond},
		duration: time.Minute, interval: 800 * time.Millisecond,
		minDelay: 20 * time.Millisecond, maxDelay: 500 * time.Millisecond, loss: 0.01, seed: 2,
	}, true)
}

func checkWorkload(t *testing.T, cfg simConfig, within bool) {
	cfg.fullVector = true
	s := newSim(t, cfg)
	delta := s.c.Delta()
	byID := map[Dep]*simMsg{}
	s.onSend = func(m *simMsg) { byID[Dep{m.m.Sender, m.m.Seq}] = m }
	n := cfg.members
	res := make([][]uint64, n) // res[r][x]: x's messages resolved at r, contiguous
	named := make([]map[Dep]bool, n)
	done := make([]map[Dep]bool, n)
	for r := range n {
		res[r] = make([]uint64, n)
		named[r], done[r] = map[Dep]bool{}, map[Dep]bool{}
	}
	var count [4]int
	var lostNamed, ctxBytes, pastDeadline int
	s.onDeliver = func(r int, now time.Time, d Delivery) {
		id := Dep{d.Message.Sender, d.Message.Seq}
		sm := byID[id]
		arr := sm.arrival[r]
		if !sm.got[r] || done[r][id] {
			t.Fatalf("%d: %v delivered at %v, arrival %v, twice %v", r, id, now, arr, done[r][id])
		}
		done[r][id] = true
		count[d.Status]++
		deadline := sm.m.Sent.Add(delta)
		if arr.Before(sm.m.Sent) {
			deadline = arr.Add(delta)
		}
		late := arr.Sub(sm.m.Sent) > delta
		x := int(id.Member)
		for _, g := range d.Missing {
			if g.First != res[r][g.Member]+1 || g.Last < g.First {
				t.Fatalf("%d: gap %v does not follow %d", r, g, res[r][g.Member])
			}
			for q := g.First; q <= g.Last; q++ {
				lm := byID[Dep{g.Member, q}]
				if lm == nil || lm.got[r] {
					t.Fatalf("%d: %v names %v#%d, which arrived", r, id, g.Member, q)
				}
				if lm.arrival[r].IsZero() {
					lostNamed++
				} else if within {
					t.Fatalf("%d: %v#%d named though only delayed within Δ", r, g.Member, q)
				}
				named[r][Dep{g.Member, q}] = true
			}
			res[r][g.Member] = g.Last
		}
		if d.Status == Late && id.Seq <= res[r][x] {
			if !named[r][id] {
				t.Fatalf("%d: %v late but never named missing", r, id)
			}
			return
		}
		if id.Seq != res[r][x]+1 {
			t.Fatalf("%d: %v out of per-sender order (resolved %d)", r, id, res[r][x])
		}
		switch d.Status {
		case Delivered:
			if now.After(deadline) || late {
				t.Fatalf("%d: %v delivered at %v past its deadline %v", r, id, now, deadline)
			}
			// Δ-causality: whatever in its causal past was still
			// within its own deadline has been delivered before it.
			// (An older one behind a message declared missing is past
			// its deadline: it is reported late when it comes.)
			for y, q := range sm.vc {
				if y == r || y == x {
					continue
				}
				for seq := res[r][y] + 1; seq <= q; seq++ {
					pm := byID[Dep{MemberID(y), seq}]
					if dl := pm.m.Sent.Add(delta); !dl.Before(now) {
						t.Fatalf("%d: %v delivered at %v before %d#%d (deadline %v) it depends on", r, id, now, y, seq, dl)
					}
					pastDeadline++
				}
			}
		case Expired:
			if !now.Equal(deadline) || len(d.Missing) == 0 {
				t.Fatalf("%d: %v expired at %v, deadline %v, missing %v", r, id, now, deadline, d.Missing)
			}
		case Late:
			if !late {
				t.Fatalf("%d: %v reported late, arrived on time", r, id)
			}
		default:
			t.Fatalf("%d: %v %v", r, id, d.Status)
		}
		res[r][x] = id.Seq
	}
	s.run(t)
	arrived, lost := 0, 0
	for _, sm := range s.msgs {
		ctxBytes += sm.m.ContextSize()
		id := Dep{sm.m.Sender, sm.m.Seq}
		for r := range n {
			switch {
			case r == int(id.Member):
			case sm.arrival[r].IsZero():
				lost++
				if res[r][id.Member] >= id.Seq && !named[r][id] {
					t.Errorf("%d: %v lost and passed over without an exception", r, id)
				}
				if within && res[r][id.Member] < id.Seq && id.Seq < s.ps[id.Member].seq {
					t.Errorf("%d: %v lost, followed by more from its sender, never named", r, id)
				}
			case !done[r][id]:
				t.Errorf("%d: %v arrived and was never delivered", r, id)
			default:
				arrived++
			}
		}
	}
	for r := range n {
		if h := s.ps[r].Held(); h != 0 {
			t.Errorf("%d: %d still held at the end", r, h)
		}
	}
	if within && count[Late] != 0 {
		t.Errorf("%d late within Δ", count[Late])
	}
	t.Logf("Δ %v, %d messages, %d arrivals, %d lost (%d named in exceptions): delivered %d, expired %d, late %d; "+
		"%d causal predecessors past their deadline not yet come; context %.1f bytes/message",
		delta, len(s.msgs), arrived, lost, lostNamed, count[Delivered], count[Expired], count[Late],
		pastDeadline, float64(ctxBytes)/float64(len(s.msgs)))
	if within && pastDeadline != 0 {
		t.Errorf("within Δ, %d deliveries overtook a causal predecessor", pastDeadline)
	}
	if lostNamed == 0 || count[Expired] == 0 {
		t.Errorf("the workload lost nothing that mattered: tune it")
	}
}
