package brokerbench

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/bench/proc"
)

// Quality bar of a point (the seed's "excellent quality").
const (
	MaxAvgLatency = 20 * time.Millisecond
	drain         = 400 * time.Millisecond // listening after the speakers stop
)

// RunPoint prepares the meetings on sys, drives them for d, and measures.
func RunPoint(ctx context.Context, sys System, scenario string, meetings []Meeting, d time.Duration) Point {
	pt := Point{System: sys.Name(), Scenario: scenario, Meetings: len(meetings), Duration: d}
	for _, m := range meetings {
		pt.Participants += m.Listeners + 1
	}
	if len(meetings) > 0 {
		pt.PerMeeting = meetings[0].Listeners + 1
	}
	clock := loadgen.NewClock()
	st, err := sys.Prepare(ctx, meetings, clock)
	if err != nil {
		pt.Error = err.Error()
		return pt
	}
	// Spread the meetings' start over one packet interval, as independent
	// meetings would be.
	rng := rand.New(rand.NewPCG(uint64(len(meetings)), 1))
	for _, s := range st.Speakers {
		s.Phase = time.Duration(rng.Int64N(int64(loadgen.AudioInterval)))
	}
	before, _ := proc.ReadCPU()
	loadgen.RunSpeakers(ctx, clock, st.Speakers, d)
	if after, err := proc.ReadCPU(); err == nil {
		pt.CPUBusyPct, pt.CPUStealPct = after.Since(before)
	}
	time.Sleep(drain)
	st.Close()
	summarize(&pt, meetings, st, d)
	return pt
}

// summarize fills the point's figures from what the listeners measured.
func summarize(pt *Point, meetings []Meeting, st *Setup, d time.Duration) {
	counted := make([]uint64, len(meetings)) // per meeting, packets sent after warm-up
	inBytes := map[loadgen.Kind]float64{}
	var warm time.Duration
	for _, s := range st.Speakers {
		counted[s.Meeting] = s.Counted
		if s.Stream.Kind() == loadgen.Audio {
			warm = max(warm, loadgen.Warmup*loadgen.AudioInterval)
		} else {
			warm = max(warm, loadgen.Warmup*time.Second/(3*loadgen.VideoFPS))
		}
	}
	window := (d - warm).Seconds()
	if window <= 0 {
		window = d.Seconds()
	}
	type acc struct {
		received, lost, late, bytes uint64
		latSum                      time.Duration
	}
	kinds := map[loadgen.Kind]*acc{}
	var delivered uint64
	pass := true
	for _, l := range st.Listeners {
		a := kinds[l.Kind]
		if a == nil {
			a = &acc{}
			kinds[l.Kind] = a
		}
		lost := l.Lost(counted[l.Meeting])
		a.received += l.Received
		a.lost += lost
		a.late += l.LateCount
		a.bytes += l.Bytes
		a.latSum += l.LatencySum
		delivered += l.Received
		if lost > 0 || l.LateCount > 0 {
			pass = false
		}
	}
	for _, s := range st.Speakers {
		// Approximate the speakers' input rate from the stream's nominal size.
		if s.Stream.Kind() == loadgen.Audio {
			inBytes[loadgen.Audio] += float64(loadgen.AudioPacketSize) * float64(s.Counted)
		} else {
			inBytes[loadgen.Video] += 740 * float64(s.Counted)
		}
	}
	pt.DeliveredPPS = float64(delivered) / window
	reported := pickReported(meetings, st.Listeners)
	for _, k := range []loadgen.Kind{loadgen.Audio, loadgen.Video} {
		a := kinds[k]
		if a == nil {
			continue
		}
		ks := KindSummary{Kind: k.String(), InMbps: inBytes[k] * 8 / window / 1e6, OutMbps: float64(a.bytes) * 8 / window / 1e6}
		if exp := a.received + a.lost; exp > 0 {
			ks.LossPct = 100 * float64(a.lost) / float64(exp)
			ks.LatePct = 100 * float64(a.late+a.lost) / float64(exp)
		}
		var subs []Subscriber
		for _, l := range reported {
			if l.Kind != k {
				continue
			}
			exp := counted[l.Meeting]
			s := Subscriber{Index: l.Index, Meeting: l.Meeting, Kind: k.String(), AvgLatencyMs: ms(l.AvgLatency()),
				JitterMs: ms(l.Jitter()), Packets: l.Received}
			if exp > 0 {
				s.LossPct = 100 * float64(l.Lost(exp)) / float64(exp)
				s.LatePct = 100 * float64(l.LateCount+l.Lost(exp)) / float64(exp)
			}
			subs = append(subs, s)
		}
		if len(subs) > 0 {
			ks.FirstLatencyMs = subs[0].AvgLatencyMs
			ks.LastLatencyMs = subs[len(subs)-1].AvgLatencyMs
			ks.LastLatePct = subs[len(subs)-1].LatePct
			for _, s := range subs {
				ks.AvgLatencyMs += s.AvgLatencyMs / float64(len(subs))
				ks.AvgJitterMs += s.JitterMs / float64(len(subs))
				ks.AvgLatePct += s.LatePct / float64(len(subs))
			}
		}
		// The pass criterion uses every listener's latency, not only the reported.
		if a.received > 0 && a.latSum/time.Duration(a.received) >= MaxAvgLatency {
			pass = false
		}
		if a.received == 0 {
			pass = false
		}
		pt.Kinds = append(pt.Kinds, ks)
		pt.Subscribers = append(pt.Subscribers, subs...)
	}
	pt.Pass = pass && pt.Error == ""
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// pickReported returns the seed's reported listeners: in a single meeting
// the first 4, middle 4 and last 4 by subscription order; with many
// meetings the first listener of the first 4, middle 4 and last 4 meetings.
// Each kind is picked on its own.
func pickReported(meetings []Meeting, ls []*loadgen.Listener) []*loadgen.Listener {
	var out []*loadgen.Listener
	for _, k := range []loadgen.Kind{loadgen.Audio, loadgen.Video} {
		var pool []*loadgen.Listener
		multi := 0
		for _, m := range meetings {
			if m.Kind == k {
				multi++
			}
		}
		for _, l := range ls {
			if l.Kind != k {
				continue
			}
			if multi > 1 && l.Index != 0 {
				continue
			}
			pool = append(pool, l)
		}
		out = append(out, firstMiddleLast(pool, 4)...)
	}
	return out
}

func firstMiddleLast[T any](s []T, n int) []T {
	if len(s) <= 3*n {
		return s
	}
	mid := len(s)/2 - n/2
	out := append([]T{}, s[:n]...)
	out = append(out, s[mid:mid+n]...)
	return append(out, s[len(s)-n:]...)
}
