package mixbench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/bench/results"
)

const ms = int64(time.Millisecond)

// feed gives r one frame every 20 ms of PCMU (160 samples) from ts0,
// arriving at base + i×20 ms + delay(i); frames before from count as
// warm-up.
func feed(r *receiver, n, from int, ts0 uint32, base int64, delay func(int) int64) {
	for i := range n {
		r.observe(ts0+uint32(160*i), 8000, base+int64(i)*20*ms+delay(i), i >= from)
	}
}

func TestReceiverOnTime(t *testing.T) {
	var r receiver
	// Steady 3 ms transit, ±1 ms: nothing late, jitter about a millisecond.
	feed(&r, 150, 50, 0xfffff000, 1e9, func(i int) int64 { return 3*ms + int64(i%3-1)*ms })
	if r.received != 100 || r.late != 0 || r.reanchored != 0 {
		t.Fatalf("received %d late %d reanchored %d, want 100, 0, 0 (the timestamps wrap)", r.received, r.late, r.reanchored)
	}
	if j := r.jitter / 1e6; j < 0.3 || j > 1.5 {
		t.Errorf("jitter %.2f ms for ±1 ms", j)
	}
	if r.maxLate != 2*ms {
		t.Errorf("latest %v ms after due, want 2", r.maxLate/ms)
	}
}

func TestReceiverLate(t *testing.T) {
	var r receiver
	// A stall at frame 100: frames 100..104 arrive together 100 ms after
	// frame 100 was due (each later one less late), then the grid goes on.
	feed(&r, 200, 50, 1000, 0, func(i int) int64 {
		if i >= 100 && i < 105 {
			return int64(100-20*(i-100)) * ms
		}
		return 0
	})
	// Late: 100 ms, 80, 60 (over 40); 40 and 20 are not.
	if r.received != 150 || r.late != 3 || r.maxLate != 100*ms {
		t.Fatalf("received %d late %d latest %d ms; want 150, 3, 100", r.received, r.late, r.maxLate/ms)
	}
	// A server that falls behind its clock for good: everything after is late.
	var s receiver
	feed(&s, 200, 50, 0, 0, func(i int) int64 {
		if i >= 150 {
			return 60 * ms
		}
		return 0
	})
	if s.late != 50 {
		t.Errorf("late %d after a 60 ms slip, want 50", s.late)
	}
	// A new timestamp base (a restarted mixer) starts the grid again.
	var u receiver
	feed(&u, 60, 0, 0, 0, func(int) int64 { return 0 })
	feed(&u, 60, 0, 123456789, 60*20*ms, func(int) int64 { return 0 })
	if u.reanchored != 1 || u.late != 0 || u.received != 120 {
		t.Errorf("after a new timestamp base: reanchored %d, late %d, received %d", u.reanchored, u.late, u.received)
	}
}

func TestQualityBar(t *testing.T) {
	window := 10 * time.Second // 500 frames each
	full := receiver{received: 500, jitter: 2e6}
	cases := []struct {
		name string
		rs   []receiver
		pass bool
	}{
		{"all on time", []receiver{full, full}, true},
		{"no receivers", nil, false},
		{"0.4% missing", []receiver{full, {received: 496}}, true},
		{"0.6% missing", []receiver{full, {received: 494}}, false},
		{"0.6% late", []receiver{{received: 500, late: 3}, {received: 500, late: 3}}, false},
		{"0.4% late", []receiver{{received: 500, late: 2}, {received: 500, late: 2}}, true},
		{"one starved among many", append(repeat(full, 399), receiver{received: 470}), false},
		{"duplicates do not make up for loss", []receiver{{received: 520}, {received: 490}}, false},
	}
	for _, c := range cases {
		q := quality(c.rs, window)
		if q.Pass() != c.pass {
			t.Errorf("%s: pass %v, want %v (%+v)", c.name, q.Pass(), c.pass, q)
		}
	}
	q := quality([]receiver{full, {received: 250, jitter: 4e6, maxLate: 55 * ms}}, window)
	if q.Expected != 1000 || q.Received != 750 || q.Starved != 1 || q.JitterMean != 3 || q.JitterMax != 4 || q.LateMax != 55 {
		t.Errorf("summed %+v", q)
	}
}

func repeat(r receiver, n int) []receiver {
	out := make([]receiver, n)
	for i := range out {
		out[i] = r
	}
	return out
}

func TestReport(t *testing.T) {
	ok := Quality{Receivers: 1000, Expected: 1000000, Received: 1000000}
	bad := Quality{Receivers: 1200, Expected: 1200000, Received: 1100000, Starved: 50}
	res := Result{Run: results.Run{Date: time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC), CPUs: 2, Warmup: "3s", Window: "20s", Pinned: true},
		Series: []Series{
			{System: "convene", Version: "convene dev", Codec: "g711", MaxOK: 300, PerCore: 400, Points: []Point{
				{Sessions: 300, Quality: ok, CPU: 0.75, CPUPerSession: 2.5, PerCore: 400, OK: true},
				{Sessions: 400, Quality: bad, CPU: 0.99, CPUPerSession: 2.47, PerCore: 404},
			}},
			{System: "janus", Version: "Janus 1.1.2", Codec: "g711", MaxOK: 100, PerCore: 120, Points: []Point{
				{Sessions: 100, Quality: ok, CPU: 0.83, PerCore: 120, OK: true},
				{Sessions: 150, Quality: bad, CPU: 1, PerCore: 150, Retry: true},
			}},
			{System: "janus", Codec: "opus", Note: "janus did not start"},
		}}
	md := Format(res)
	for _, want := range []string{
		"## G.711 μ-law", "## Opus",
		"| convene | 300 | 100.00% | 0.00% | 0 |", "| janus | 150 (again) | 91.67% |",
		"**300 sessions** at the bar, 400 sessions per core there",
		"Convene / Janus AudioBridge sessions: **3.00×** (target 1.5×)",
		"Convene G.711 sessions per core at its most: **400** (target 100)",
		"janus (): **0 sessions** at the bar — janus did not start",
		"more than 40 ms after that", "≥ 99.5%", "≤ 0.5%",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	dir := t.TempDir()
	path, err := Write(dir, res)
	if err != nil || filepath.Base(path) != "2026-11-25-080000-mixer.md" {
		t.Fatalf("wrote %q, %v", path, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "2026-11-25-080000-mixer.json")); err != nil {
		t.Error(err)
	}
}
