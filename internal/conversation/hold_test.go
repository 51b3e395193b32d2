package conversation

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkOrderingHold prints the delivery latency ordering adds under
// the seed's workload: each message reaches each other member after
// 20–500 ms or is lost (1 %), and the receiver holds it until what it
// depends on has come or its deadline passes. The hold is delivery −
// arrival at each receiver, over every arrival (most are delivered at
// once: hold 0). Two Δs: the seed's flows (Δ = 200 ms, most messages then
// arrive after their deadline and are delivered late at once) and flows
// that tolerate the network's delay (Δ = 500 ms: nothing late, a message
// waits for what it follows). The conversation carries 20 messages a
// second whatever its size, as BenchmarkContextSize's chat.
// Run: go test -run - -bench OrderingHold -benchtime 1x
func BenchmarkOrderingHold(b *testing.B) {
	within := []Flow{
		{ID: 1, Name: "chat", Delay: 450 * time.Millisecond, LossDelay: 800 * time.Millisecond},
		{ID: 2, Name: "strokes", Delay: 400 * time.Millisecond, LossDelay: 900 * time.Millisecond},
	}
	for _, w := range []struct {
		name  string
		flows []Flow
	}{{"seed-delta200ms", seedFlows}, {"delta500ms", within}} {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/members=%d", w.name, n), func(b *testing.B) {
				for b.Loop() {
					benchHold(b, n, w.flows)
				}
			})
		}
	}
}

func benchHold(b *testing.B, n int, flows []Flow) {
	s := newSim(b, simConfig{
		members: n, spec: Spec{ID: 1, Flows: flows, Skew: 25 * time.Millisecond},
		duration: time.Minute, interval: time.Duration(n) * time.Second / 20,
		minDelay: 20 * time.Millisecond, maxDelay: 500 * time.Millisecond, loss: 0.01, seed: 5,
	})
	byID := map[Dep]*simMsg{}
	s.onSend = func(sm *simMsg) { byID[Dep{sm.m.Sender, sm.m.Seq}] = sm }
	var holds []time.Duration
	var count [4]int
	s.onDeliver = func(r int, now time.Time, d Delivery) {
		count[d.Status]++
		sm := byID[Dep{d.Message.Sender, d.Message.Seq}]
		holds = append(holds, now.Sub(sm.arrival[r]))
	}
	s.run(b)
	if len(holds) == 0 {
		b.Fatal("no deliveries")
	}
	slices.Sort(holds)
	var sum time.Duration
	held := 0
	for _, h := range holds {
		sum += h
		if h > 0 {
			held++
		}
	}
	q := func(p float64) float64 {
		return float64(holds[min(len(holds)-1, int(p*float64(len(holds))))]) / float64(time.Millisecond)
	}
	all := float64(len(holds))
	b.ReportMetric(q(0.50), "hold-p50-ms")
	b.ReportMetric(q(0.99), "hold-p99-ms")
	b.ReportMetric(float64(sum)/all/float64(time.Millisecond), "hold-mean-ms")
	b.ReportMetric(100*float64(held)/all, "held-%")
	b.ReportMetric(100*float64(count[Expired])/all, "expired-%")
	b.ReportMetric(100*float64(count[Late])/all, "late-%")
	b.ReportMetric(s.c.Delta().Seconds()*1000, "delta-ms")
}
