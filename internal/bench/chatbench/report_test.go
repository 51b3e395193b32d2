package chatbench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/bench/floorbench"
)

func TestVerdict(t *testing.T) {
	good := Point{Offered: 100, Sent: 500, E2E: Latency{P99: 12}}
	for _, c := range []struct {
		p   func(Point) Point
		why string
	}{
		{func(p Point) Point { return p }, ""},
		{func(p Point) Point { p.Gone = 1; return p }, "sockets gone"},
		{func(p Point) Point { p.Refused, p.Refusal = 3, "rate_limited"; return p }, "3 refused (rate_limited)"},
		{func(p Point) Point { p.Lost = 7; return p }, "7 deliveries missing"},
		{func(p Point) Point { p.E2E.P99 = 100; return p }, "p99 100.0 ms"},
		{func(p Point) Point { p.Sent = 400; return p }, "could not keep up"},
	} {
		ok, why := verdict(c.p(good), 5*time.Second)
		if ok != (c.why == "") || !strings.Contains(why, c.why) {
			t.Errorf("want %q, got %v %q", c.why, ok, why)
		}
	}
}

func TestReport(t *testing.T) {
	dir := t.TempDir()
	if latestFloor(dir) != nil {
		t.Fatal("a floor report in an empty directory")
	}
	for i, h := range []float64{0.5, 0.25} { // the newer one is quoted
		fr := floorbench.Result{Grant: floorbench.Stats{N: 10, P50: 0.1, P99: 0.2}, Handover: floorbench.Stats{N: 10, P50: h, P99: 2 * h}}
		b, _ := json.Marshal(fr)
		os.WriteFile(filepath.Join(dir, "2026-01-0"+string(rune('1'+i))+"-000000-floor.json"), b, 0o644)
	}
	f := latestFloor(dir)
	if f == nil || f.Report != "2026-01-02-000000-floor.json" || f.Handover.P50 != 0.25 {
		t.Fatalf("floor %+v", f)
	}
	r := Result{Date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Version: "convene test", Window: "2s", Rate: 80, Size: 64, Floor: f,
		Notes: []string{"a busy machine"},
		Series: []Series{
			{Members: 10, Joins: Latency{N: 10, P50: 1.5, P99: 3}, MaxOK: 200, Points: []Point{
				{Offered: 200, Sessions: 1, OK: true, Order: Latency{P50: 0.01, P99: 0.02}, MsgsPerCore: 4321, Profile: "x.pprof"},
				{Offered: 500, Sessions: 1, Why: "p99 250.0 ms"},
			}},
			{Members: 100, Points: []Point{{Offered: 200, Why: "3 refused (rate_limited)"}}},
		}}
	md := Format(r)
	for _, want := range []string{"### Sessions of 10 members", "Highest passing rate: **200 msg/s**", "4321 messages", "`x.pprof`",
		"**no** (p99 250.0 ms)", "No step passed.", "| 1.500 | 3.000 | 4.5 conversation create |", "0.250 | 0.500 | 0.96 token transfer",
		"sessions of 10 at 200 msg/s"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	path, err := Write(dir, r)
	if err != nil || filepath.Base(path) != "2026-01-02-030405-chat.md" {
		t.Fatalf("%s %v", path, err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "- a busy machine") {
		t.Errorf("notes missing:\n%s", b)
	}
	var back Result
	b, _ = os.ReadFile(strings.TrimSuffix(path, ".md") + ".json")
	if err := json.Unmarshal(b, &back); err != nil || back.Series[0].Points[0].MsgsPerCore != 4321 || back.Floor.Handover.P50 != 0.25 {
		t.Fatalf("json: %+v %v", back, err)
	}
	r.Floor = nil
	if !strings.Contains(Format(r), "run `convene-bench floor`") {
		t.Error("without a floor report the table does not say how to get one")
	}
}
