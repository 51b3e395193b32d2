package brokerbench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// syntheticReport has points for all five scenarios on two systems.
func syntheticReport() Report {
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	r := Report{
		Started: start, Finished: start.Add(25 * time.Minute),
		Host: "testhost, Test CPU @ 3.0GHz, 2 logical CPUs", Quick: true,
		Probes: []Probe{{Subscribers: 1000, PacketSize: 252, DeliveredPPS: 400000, SentPPS: 400, Seconds: 5},
			{Subscribers: 1000, PacketSize: 252, DeliveredPPS: 390000, SentPPS: 390, Seconds: 5}},
		Notes: []string{"Janus peer not run: not built yet"},
	}
	kind := func(k string, n int, lat float64) KindSummary {
		late := 0.0
		if lat >= 20 {
			late = 1.5
		}
		return KindSummary{Kind: k, FirstLatencyMs: lat / 4, LastLatencyMs: lat * 1.5, AvgLatencyMs: lat,
			AvgJitterMs: lat / 10, AvgLatePct: late, LastLatePct: late * 2, LatePct: late, LossPct: late / 3,
			InMbps: 0.064, OutMbps: float64(n) * 0.064}
	}
	type spec struct {
		sc       string
		kinds    []string
		meetings func(x int) (meetings, per int)
		xs       []int
	}
	specs := []spec{
		{ScenarioAudio, []string{"audio"}, func(x int) (int, int) { return 1, x + 1 }, []int{1000, 2000, 4000}},
		{ScenarioVideo, []string{"video"}, func(x int) (int, int) { return 1, x + 1 }, []int{400, 800}},
		{ScenarioCombined, []string{"audio", "video"}, func(x int) (int, int) { return 2, x + 1 }, []int{400, 800}},
		{ScenarioMultiVideo, []string{"video"}, func(x int) (int, int) { return x, 20 }, []int{20, 40, 80}},
		{ScenarioMultiCombined, []string{"audio", "video"}, func(x int) (int, int) { return x, 20 }, []int{20, 40}},
	}
	for _, sys := range []string{"nats-server", "convene"} { // convene must still come first
		scale := 1.0
		if sys == "nats-server" {
			scale = 3
		}
		for _, s := range specs {
			var largest, failed int
			// Measure in reverse order: the report must sort.
			for i := len(s.xs) - 1; i >= 0; i-- {
				m, per := s.meetings(s.xs[i])
				n := m * per
				lat := scale * float64(n) / 200
				pt := Point{System: sys, Scenario: s.sc, Meetings: m, PerMeeting: per, Participants: n,
					Duration: 5 * time.Second, DeliveredPPS: float64(n) * 33, ProbeFraction: float64(n) * 33 / 400000}
				for _, k := range s.kinds {
					pt.Kinds = append(pt.Kinds, kind(k, n, lat))
				}
				pt.Subscribers = []Subscriber{{Index: 0, Kind: s.kinds[0], AvgLatencyMs: lat, Packets: 100}}
				pt.Pass = lat < 20
				if pt.Pass {
					largest = max(largest, n)
				} else if failed == 0 || n < failed {
					failed = n
				}
				r.Points = append(r.Points, pt)
			}
			r.Maxima = append(r.Maxima, Max{System: sys, Scenario: s.sc, Participants: largest, Meetings: 1, FailedAt: failed})
		}
	}
	r.Points = append(r.Points, Point{System: "nats-server", Scenario: ScenarioAudio, Meetings: 1, PerMeeting: 9001,
		Participants: 9001, Error: "preparing: too many open files"})
	return r
}

func TestWriteReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results") // WriteReport makes it
	r := syntheticReport()
	md, js, pngs, err := WriteReport(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "2026-03-04-050607.md"); md != want {
		t.Errorf("md path %s, want %s", md, want)
	}
	if want := filepath.Join(dir, "2026-03-04-050607.json"); js != want {
		t.Errorf("json path %s, want %s", js, want)
	}

	// The JSON is indented and round-trips.
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("\n  \"started\"")) {
		t.Errorf("JSON not indented:\n%.200s", b)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("JSON does not round-trip:\n got %+v\nwant %+v", back, r)
	}

	// One PNG per scenario.
	if len(pngs) != len(allScenarios) {
		t.Errorf("%d PNGs, want %d: %v", len(pngs), len(allScenarios), pngs)
	}
	for _, sc := range allScenarios {
		p := filepath.Join(dir, "2026-03-04-050607-"+sc+".png")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Error(err)
			continue
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s is not a PNG", p)
		}
	}

	mb, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	m := string(mb)
	for _, st := range SeedTables {
		hdr := "| " + strings.Join(st.Header, " | ") + " |"
		if !strings.Contains(m, hdr) {
			t.Errorf("Markdown lacks seed Table %d's header %q", st.Number, hdr)
		}
		if !strings.Contains(m, st.Caption) {
			t.Errorf("Markdown lacks seed Table %d's caption", st.Number)
		}
	}
	for _, want := range []string{
		"| 1600 | 2260 | 2290 | 2275 | 1.2 | % 100 | 102.4 |", // Table 1's last row
		"1400", "2275", "9421",
		"testhost", "Mode: quick",
		"## Probe", "| start | 1000 | 252 | 400000 |",
		"Last late arrivals (%)", "Users (each meeting)", "In BW (Mbps)",
		"## Largest passing size", "## Notes", "Janus peer not run",
		"ERROR: preparing: too many open files",
		"![single-audio: average latency against participants](2026-03-04-050607-single-audio.png)",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	// Each scenario: our table, then the seed's right after.
	for _, st := range SeedTables {
		i := strings.Index(m, "## "+st.Scenario+" (")
		j := strings.Index(m, "**Seed: "+st.Caption+"**")
		if i < 0 || j < i {
			t.Errorf("seed Table %d not inside section %s", st.Number, st.Scenario)
		}
	}
	// Grouped by system (convene first), sorted by participants.
	sec := m[strings.Index(m, "## single-audio"):strings.Index(m, "## single-video")]
	var order []string
	for _, line := range strings.Split(sec, "\n") {
		if f := strings.Split(line, " | "); len(f) > 2 && (strings.HasPrefix(line, "| convene") || strings.HasPrefix(line, "| nats-server")) {
			order = append(order, strings.TrimPrefix(f[0], "| ")+" "+f[1])
		}
	}
	want := []string{"convene 1001", "convene 2001", "convene 4001", "nats-server 1001", "nats-server 2001", "nats-server 4001", "nats-server 9001"}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("single-audio rows %v, want %v", order, want)
	}
	// Summary: convene 2001 (fails at 4001) vs nats-server 1001, ratio 2.00;
	// audio+video in users of each meeting.
	if !strings.Contains(m, "| single-audio | 2001 (4001) | 1001 (2001) | 1400 | 1400 | 2.00 | 1.43 |") {
		t.Errorf("summary row for single-audio missing:\n%s", m[strings.Index(m, "## Largest"):])
	}
	if !strings.Contains(m, "| audio+video | 801 | 401 (801) | 300 | 400 | 2.00 | 2.67 |") {
		t.Errorf("summary row for audio+video missing:\n%s", m[strings.Index(m, "## Largest"):])
	}
	if !strings.Contains(m, SeedCriterion) {
		t.Error("Markdown does not say the seed criterion")
	}

	txt := FormatTables(r)
	for _, want := range []string{"Seed: Table 1 Test results", "2275", "1400", "Largest passing size", "convene / nats-server"} {
		if !strings.Contains(txt, want) {
			t.Errorf("FormatTables lacks %q", want)
		}
	}
	if strings.Contains(txt, "| ---") {
		t.Error("FormatTables printed Markdown")
	}
	// Columns are aligned: the header and the rule line are as wide.
	lines := strings.Split(txt, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "Total Users") && i+1 < len(lines) {
			if len([]rune(strings.TrimRight(l, " "))) > len([]rune(lines[i+1])) {
				t.Errorf("header wider than its rule:\n%s\n%s", l, lines[i+1])
			}
		}
	}
}

func TestWriteReportSkipsEmptyScenarios(t *testing.T) {
	dir := t.TempDir()
	r := syntheticReport()
	var audio []Point
	for _, p := range r.Points {
		if p.Scenario == ScenarioAudio {
			audio = append(audio, p)
		}
	}
	r.Points = audio
	r.Maxima = nil
	md, _, pngs, err := WriteReport(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(pngs) != 1 || !strings.HasSuffix(pngs[0], "-single-audio.png") {
		t.Errorf("pngs %v, want only single-audio", pngs)
	}
	b, _ := os.ReadFile(md)
	if !strings.Contains(string(b), "Not measured in this run.") {
		t.Error("unmeasured scenario not said")
	}
	// Largest passing sizes fall back to the points without Maxima.
	if !strings.Contains(string(b), "| single-audio | 2001 (4001) | 1001 (2001) |") {
		t.Error("largest sizes not taken from the points")
	}

	// An empty report still writes its files.
	md, js, pngs, err := WriteReport(dir, Report{Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if len(pngs) != 0 {
		t.Errorf("pngs %v for an empty report", pngs)
	}
	for _, p := range []string{md, js} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
}

func TestSeedTables(t *testing.T) {
	if len(SeedTables) != 7 {
		t.Fatalf("%d seed tables", len(SeedTables))
	}
	rows := []int{8, 7, 5, 6, 6, 6, 6}
	for i, st := range SeedTables {
		if st.Number != i+1 {
			t.Errorf("table %d numbered %d", i+1, st.Number)
		}
		if len(st.Rows) != rows[i] {
			t.Errorf("Table %d: %d rows, want %d", st.Number, len(st.Rows), rows[i])
		}
		for _, r := range st.Rows {
			if len(r) != len(st.Header) {
				t.Errorf("Table %d row %v: %d cells for %d columns", st.Number, r, len(r), len(st.Header))
			}
			for _, c := range r {
				if _, err := SeedNumber(c); err != nil {
					t.Errorf("Table %d: cell %q: %v", st.Number, c, err)
				}
			}
		}
		if xs, _ := st.LatencyCurve(); len(xs) != len(st.Rows) {
			t.Errorf("Table %d: latency curve of %d points", st.Number, len(xs))
		}
	}
	// Known figures.
	if got := SeedTables[0].Rows[7][3]; got != "2275" {
		t.Errorf("Table 1 at 1600 users: avg latency %s, want 2275", got)
	}
	if got := SeedTables[5].Rows[5][2]; got != "9287" {
		t.Errorf("Table 6 at 1200 users: avg latency %s, want 9287", got)
	}

	// SeedMax.Users is what the criterion reads off the tables: the largest
	// size where every table of the scenario has 0 late and avg < 20 ms.
	for _, m := range SeedMaxima {
		ok := map[float64]int{} // users -> tables passing there
		tables := seedTablesFor(m.Scenario)
		for _, st := range tables {
			for _, r := range st.Rows {
				u, _ := SeedNumber(r[st.UsersCol])
				lat, _ := SeedNumber(r[st.AvgLatencyCol])
				pass := lat < 20
				for c, h := range st.Header {
					if strings.Contains(strings.ToLower(h), "arrivals") {
						if v, _ := SeedNumber(r[c]); v != 0 {
							pass = false
						}
					}
				}
				if pass {
					ok[u]++
				}
			}
		}
		best := 0.0
		for u, n := range ok {
			if n == len(tables) {
				best = max(best, u)
			}
		}
		if int(best) != m.Users {
			t.Errorf("%s: seed size by the criterion is %v, SeedMaxima says %d", m.Scenario, best, m.Users)
		}
	}
}
