package recbench

import (
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/bench/results"
)

func TestReport(t *testing.T) {
	res := Result{Run: results.Run{Date: time.Date(2026, 11, 25, 11, 0, 0, 0, time.UTC), CPUs: 2, Warmup: "3s", Window: "10s", Pinned: true, Nice: -10},
		Series: []Series{
			{System: "convene", Version: "convene dev", Shape: "128k", PerRoom: 10, MaxOK: 400, PerCore: 500, Points: []Point{
				{Streams: 400, Rooms: 40, Sent: 200000, Nominal: 200000, Drops: 0, ForwardDrops: 0, Live: Live{Received: 200000, Expected: 200000}, CPU: 0.8, PerCore: 500},
				{Streams: 600, Rooms: 60, Sent: 300000, Nominal: 300000, Missing: 12, MissingStreams: 2, Drops: 12, ForwardDrops: 3,
					Live: Live{Received: 299000, Expected: 300000, Loss: 0.0033, Late: 40, LatP99: 120}, CPU: 1, PerCore: 600},
			}},
			{System: "janus", Version: "Janus 1.1.2", Shape: "128k", PerRoom: 10, MaxOK: 200, PerCore: 300, Points: []Point{
				{Streams: 200, Rooms: 20, Sent: 100000, Nominal: 100000, Drops: -1, Live: Live{Received: 100000, Expected: 100000}, CPU: 0.66, PerCore: 300},
				{Streams: 400, Rooms: 40, Sent: 190000, Nominal: 200000, Skipped: 10, Drops: -1, Live: Live{Received: 190000, Expected: 190000}, Retry: true},
			}},
		}}
	for i := range res.Series {
		for j := range res.Series[i].Points {
			p := &res.Series[i].Points[j]
			p.OK, p.Why = judge(*p)
		}
	}
	md := Format(res)
	for _, want := range []string{
		"## 128 kb/s",
		"| convene | 400 | 40 | 100.0% | 0 | 0 / 0 | 0 / 0 | 0.00% | 0 |",
		"12 packets of 2 streams not recorded; 40 live packets later than 100 ms",
		"| janus | 400 (again) | 40 | 95.0% | 0 | – | 0 / 0 |",
		"the load skipped 10 frames",
		"**400 streams** at the bar, 500 streams per core",
		"Convene / Janus streams: **2.00×** (target 1.5×)",
		"target 1000; Voyager's node: 37",
		"niceness -10",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	// Janus passing no step leaves no ratio, and says so.
	res.Series[1].MaxOK = 0
	if md := Format(res); !strings.Contains(md, "Janus passed no step (its first, 200 streams, did not)") {
		t.Errorf("no ratio line for a Janus at 0:\n%s", md)
	}
	if strings.Contains(md, "## 5 Mb/s") {
		t.Error("a rate not run has a section")
	}
	if !res.Series[0].Points[0].OK || res.Series[0].Points[1].OK || !res.Series[1].Points[0].OK || res.Series[1].Points[1].OK {
		t.Error("judge")
	}
}

func TestShapes(t *testing.T) {
	a, v := Shapes["128k"], Shapes["5M"]
	if a.PacketsPerSecond() != 50 || a.BitsPerSecond() != 128000 {
		t.Errorf("128k: %v packets/s, %v b/s", a.PacketsPerSecond(), a.BitsPerSecond())
	}
	if pps, bps := v.PacketsPerSecond(), v.BitsPerSecond(); pps < 519 || pps > 521 || bps < 4.9e6 || bps > 5.1e6 {
		t.Errorf("5M: %v packets/s, %v b/s", pps, bps)
	}
}
