package brokerbench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// stampFormat names a report's files (UTC), as the knee profiles are named.
const stampFormat = "2006-01-02-150405"

// allScenarios lists the seed's scenarios in the paper's order.
var allScenarios = []string{ScenarioAudio, ScenarioVideo, ScenarioCombined, ScenarioMultiVideo, ScenarioMultiCombined}

// WriteReport writes r into dir as <stamp>.md, <stamp>.json (indented) and
// one <stamp>-<scenario>.png per scenario with points, stamp being r.Started
// in UTC as YYYY-MM-DD-HHMMSS. A plot that cannot be drawn is said in the
// Markdown's notes rather than failing the report.
func WriteReport(dir string, r Report) (mdPath, jsonPath string, pngs []string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", nil, err
	}
	started := r.Started
	if started.IsZero() {
		started = time.Now()
	}
	stamp := started.UTC().Format(stampFormat)
	if jsonPath, err = writeJSON(dir, stamp, r); err != nil {
		return "", "", nil, err
	}
	pngs, plotNotes := writePlots(dir, stamp, r)
	mdPath = filepath.Join(dir, stamp+".md")
	md := markdown(r, started, pngs, plotNotes)
	if err := os.WriteFile(mdPath, []byte(md), 0o644); err != nil {
		return "", jsonPath, pngs, err
	}
	return mdPath, jsonPath, pngs, nil
}

// writeJSON writes v, indented, to dir/stamp.json.
func writeJSON(dir, stamp string, v any) (string, error) {
	path := filepath.Join(dir, stamp+".json")
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// FormatTables returns the report's tables (probe, per scenario ours and
// the seed's, largest passing sizes) as aligned plain text for a terminal.
func FormatTables(r Report) string {
	var b strings.Builder
	for _, t := range probeTables(r) {
		t.text(&b)
	}
	for _, sc := range allScenarios {
		ours := scenarioTables(r, sc)
		if len(ours) == 0 {
			continue
		}
		for i, t := range ours {
			t.text(&b)
			if st := seedTablesFor(sc); i < len(st) {
				seedTable(st[i]).text(&b)
			}
		}
	}
	summaryTable(r).text(&b)
	fmt.Fprintf(&b, "Seed's size: %s.\n", SeedCriterion)
	return b.String()
}

func markdown(r Report, started time.Time, pngs []string, plotNotes []string) string {
	var b strings.Builder
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "# Convene benchmark, %s\n\n", started.UTC().Format("2006-01-02 15:04:05 UTC"))
	fmt.Fprintf(&b, "- Date: %s", started.UTC().Format(time.RFC3339))
	if !r.Finished.IsZero() {
		fmt.Fprintf(&b, " to %s (%s)", r.Finished.UTC().Format(time.RFC3339), r.Finished.Sub(started).Round(time.Second))
	}
	fmt.Fprintf(&b, "\n- Host: %s\n- Mode: %s\n", mdEscape(orDash(r.Host)), mode)
	if sys := systemsOf(r); len(sys) > 0 {
		fmt.Fprintf(&b, "- Systems: %s\n", strings.Join(sys, ", "))
	}
	b.WriteString("- Seed: av-service-architecture-single-broker-performance, section 4 (NaradaBrokering on a dual Xeon 2.4 GHz, JDK 1.4.2, gigabit LAN)\n")
	b.WriteString("- Pass: 0 % late (later than 100 ms) or lost packets at every listener, and average latency under 20 ms\n")
	fmt.Fprintf(&b, "- Rerun: a point that fails while the hypervisor steals more than %.0f %% of the CPU is measured once more at the same size, "+
		"for every system alike; the second measurement decides and both are in the tables (\"measured again\")\n\n", StealRerunPct)

	b.WriteString("## Probe\n\n")
	b.WriteString("The machine's own UDP fan-out limit (bench/probe/probe.c: one sendmmsg thread, one epoll/recvmmsg thread, no per-packet work), measured for several subscriber counts at the start and once more at the end of the run; × probe in the tables below is a point's delivered packets/s over the probe's with the nearest subscriber count.\n\n")
	pt := probeTables(r)
	if len(pt) == 0 {
		b.WriteString("No probe result.\n\n")
	}
	for _, t := range pt {
		t.title = ""
		t.markdown(&b)
	}

	for _, sc := range allScenarios {
		st := seedTablesFor(sc)
		nums := make([]string, len(st))
		for i, t := range st {
			nums[i] = strconv.Itoa(t.Number)
		}
		fmt.Fprintf(&b, "## %s (seed Table %s)\n\n", sc, strings.Join(nums, "/"))
		ours := scenarioTables(r, sc)
		if len(ours) == 0 {
			b.WriteString("Not measured in this run.\n\n")
		}
		for i, t := range ours {
			t.markdown(&b)
			if i < len(st) {
				seedTable(st[i]).markdown(&b)
			}
		}
		if len(ours) == 0 {
			for _, t := range st {
				seedTable(t).markdown(&b)
			}
		}
		for _, p := range pngs {
			if strings.HasSuffix(filepath.Base(p), "-"+sc+".png") {
				fmt.Fprintf(&b, "![%s: average latency against participants](%s)\n\n", sc, filepath.Base(p))
			}
		}
	}

	b.WriteString("## Largest passing size\n\n")
	s := summaryTable(r)
	s.title = ""
	s.markdown(&b)
	fmt.Fprintf(&b, "The seed's size is %s. Its text claims larger sizes where it accepts a few late packets; those are in the column \"seed's text\". audio+video counts the users of each of its two meetings, as the seed's Tables 3/4 do; the multi-meeting scenarios count users in all meetings of 20.\n\n", SeedCriterion)
	for _, m := range SeedMaxima {
		fmt.Fprintf(&b, "- %s: seed %d by that bar; its text: %d, %s\n", m.Scenario, m.Users, m.Stated, mdEscape(m.StatedWhere))
	}
	b.WriteString("\n")

	b.WriteString("## Notes\n\n")
	notes := append(slices.Clone(r.Notes), plotNotes...)
	notes = append(notes,
		"Our tables follow the seed's column layout; the first column names the system, and the columns after Out/In BW are ours: late % over every listener (not only the reported ones), loss %, packets/s delivered to listeners, that over the probe's, and the verdict.",
		"Reported listeners are the seed's: first 4, middle 4 and last 4 by subscription order in a single meeting; the first listener of 12 meetings (first, middle and last 4) with many. Avg. late arrivals is over the reported listeners, as in the seed.",
		"Out BW and In BW are the broker's totals over all meetings of the point, both kinds included, as in the seed's Tables 3/4 and 6/7. Table 3 prints its unit as kbps; its values are Mbps (206.4 for 600 users in both Tables 3 and 4).",
		"The seed's late arrivals are percentages; its \"%\" sign stands before the figure as printed.")
	for _, n := range notes {
		fmt.Fprintf(&b, "- %s\n", mdEscape(n))
	}
	return b.String()
}

// table is a titled grid printed as Markdown or as aligned text.
type table struct {
	title  string
	header []string
	short  []string // header for aligned text, when the Markdown's is long
	rows   [][]string
	foot   string // a line under the table
}

func (t table) markdown(b *strings.Builder) {
	if t.title != "" {
		fmt.Fprintf(b, "**%s**\n\n", mdEscape(t.title))
	}
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	row(t.header)
	b.WriteString("|")
	for range t.header {
		b.WriteString(" --- |")
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		row(r)
	}
	b.WriteString("\n")
	if t.foot != "" {
		fmt.Fprintf(b, "%s\n\n", mdEscape(t.foot))
	}
}

func (t table) text(b *strings.Builder) {
	if len(t.short) == len(t.header) {
		t.header = t.short
	}
	w := make([]int, len(t.header))
	for i, h := range t.header {
		w[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(w) {
				w[i] = max(w[i], utf8.RuneCountInString(c))
			}
		}
	}
	line := func(cells []string) {
		var s strings.Builder
		for i, c := range cells {
			if i >= len(w) {
				break
			}
			if i > 0 {
				s.WriteString("  ")
			}
			s.WriteString(c + strings.Repeat(" ", w[i]-utf8.RuneCountInString(c)))
		}
		b.WriteString(strings.TrimRight(s.String(), " ") + "\n")
	}
	if t.title != "" {
		b.WriteString(t.title + "\n")
	}
	line(t.header)
	rule := make([]string, len(w))
	for i := range w {
		rule[i] = strings.Repeat("-", w[i])
	}
	line(rule)
	for _, r := range t.rows {
		line(r)
	}
	if t.foot != "" {
		b.WriteString(t.foot + "\n")
	}
	b.WriteString("\n")
}

func seedTable(t SeedTable) table {
	return table{title: "Seed: " + t.Caption, header: t.Header, rows: t.Rows}
}

func probeTables(r Report) []table {
	if len(r.Probes) == 0 {
		return nil
	}
	t := table{title: "Probe: the machine's UDP fan-out limit",
		header: []string{"Probe", "Subscribers", "Packet size (B)", "Delivered pkt/s", "Sent pkt/s", "Seconds", "Steal (%)"}}
	for i, p := range r.Probes {
		name := "start"
		if i == len(r.Probes)-1 && i > 0 {
			name = "end"
		}
		t.rows = append(t.rows, []string{name, strconv.Itoa(p.Subscribers), strconv.Itoa(p.PacketSize),
			fmt.Sprintf("%.0f", p.DeliveredPPS), fmt.Sprintf("%.0f", p.SentPPS), fmt.Sprintf("%.1f", p.Seconds),
			fmt.Sprintf("%.0f", p.CPUStealPct)})
	}
	return []table{t}
}

// layout is the seed's column layout of a table.
type layout int

const (
	layoutSingle     layout = iota // Table 1 (and 3)
	layoutSingleLast               // Table 2 (and 4): last user's and average late arrivals
	layoutMulti                    // Tables 5, 6, 7
)

type kindTable struct {
	kind   string
	layout layout
}

func scenarioKinds(scenario string) []kindTable {
	switch scenario {
	case ScenarioAudio:
		return []kindTable{{"audio", layoutSingle}}
	case ScenarioVideo:
		return []kindTable{{"video", layoutSingleLast}}
	case ScenarioCombined:
		return []kindTable{{"audio", layoutSingle}, {"video", layoutSingleLast}}
	case ScenarioMultiVideo:
		return []kindTable{{"video", layoutMulti}}
	case ScenarioMultiCombined:
		return []kindTable{{"audio", layoutMulti}, {"video", layoutMulti}}
	}
	return nil
}

// seedUsers is a point's size in the seed's unit: users of each meeting for
// ScenarioCombined, users in all meetings otherwise.
func seedUsers(p Point) int {
	if p.Scenario == ScenarioCombined && p.Meetings > 0 {
		return p.Participants / p.Meetings
	}
	return p.Participants
}

// seedUnits converts a participant count of scenario to the seed's unit.
func seedUnits(scenario string, participants int) int {
	if scenario == ScenarioCombined {
		return participants / 2
	}
	return participants
}

// systemsOf returns the systems in r: convene first, then the others in
// the order they first appear.
func systemsOf(r Report) []string {
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, p := range r.Points {
		add(p.System)
	}
	for _, m := range r.Maxima {
		add(m.System)
	}
	if i := slices.Index(out, "convene"); i > 0 {
		out = append([]string{"convene"}, slices.Delete(out, i, i+1)...)
	}
	return out
}

// scenarioPoints returns the scenario's points grouped by system (in
// systemsOf order) and sorted by participants within each.
func scenarioPoints(r Report, scenario string) []Point {
	order := systemsOf(r)
	var pts []Point
	for _, p := range r.Points {
		if p.Scenario == scenario {
			pts = append(pts, p)
		}
	}
	slices.SortStableFunc(pts, func(a, b Point) int {
		if c := slices.Index(order, a.System) - slices.Index(order, b.System); c != 0 {
			return c
		}
		return a.Participants - b.Participants
	})
	return pts
}

func kindOf(p Point, kind string) (KindSummary, bool) {
	for _, k := range p.Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindSummary{}, false
}

// scenarioTables returns our tables of a scenario in the seed's layouts,
// one per kind the seed reports (nil when the run has no points there).
func scenarioTables(r Report, scenario string) []table {
	pts := scenarioPoints(r, scenario)
	if len(pts) == 0 {
		return nil
	}
	seeds := seedTablesFor(scenario)
	var out []table
	for i, kt := range scenarioKinds(scenario) {
		title := fmt.Sprintf("Ours: %s", scenario)
		if len(scenarioKinds(scenario)) > 1 {
			title += ", " + kt.kind + " listeners"
		}
		if i < len(seeds) {
			title += fmt.Sprintf(" (layout of seed Table %d)", seeds[i].Number)
		}
		t := table{title: title}
		users := "Total users"
		if scenario == ScenarioCombined {
			users = "Users (each meeting)"
		}
		shortUsers := "Users"
		if scenario == ScenarioCombined {
			shortUsers = "Users/mtg"
		}
		switch kt.layout {
		case layoutSingle:
			t.header = []string{"System", users, "First user latency (ms)", "Last user latency (ms)", "Avg. latency (ms)", "Avg. jitter (ms)", "Avg. late arrivals (%)", "Out BW (Mbps)"}
			t.short = []string{"System", shortUsers, "First ms", "Last ms", "Avg ms", "Jitter ms", "Avg late %", "Out Mbps"}
		case layoutSingleLast:
			t.header = []string{"System", users, "First user latency (ms)", "Last user latency (ms)", "Avg. latency (ms)", "Avg. jitter (ms)", "Last late arrivals (%)", "Avg. late arrivals (%)", "Out BW (Mbps)"}
			t.short = []string{"System", shortUsers, "First ms", "Last ms", "Avg ms", "Jitter ms", "Last late %", "Avg late %", "Out Mbps"}
		case layoutMulti:
			t.header = []string{"System", "Total meetings", users, "Avg. latency (ms)", "Avg. jitter (ms)", "Avg. late arrivals (%)", "In BW (Mbps)", "Out BW (Mbps)"}
			t.short = []string{"System", "Meetings", shortUsers, "Avg ms", "Jitter ms", "Avg late %", "In Mbps", "Out Mbps"}
		}
		t.header = append(t.header, "Late, all (%)", "Loss (%)", "Delivered pkt/s", "× probe", "CPU busy (%)", "Steal (%)", "Pass")
		t.short = append(t.short, "All late %", "Loss %", "pkt/s", "×probe", "Busy %", "Steal %", "Pass")
		for _, p := range pts {
			var in, outBW float64
			for _, k := range p.Kinds {
				in += k.InMbps
				outBW += k.OutMbps
			}
			k, ok := kindOf(p, kt.kind)
			num := func(f func() string) string {
				if !ok {
					return "—"
				}
				return f()
			}
			bw := func(v float64) string {
				if len(p.Kinds) == 0 {
					return "—"
				}
				return fmt.Sprintf("%.1f", v)
			}
			row := []string{p.System}
			if kt.layout == layoutMulti {
				row = append(row, strconv.Itoa(p.Meetings))
			}
			row = append(row, strconv.Itoa(seedUsers(p)))
			if kt.layout != layoutMulti {
				row = append(row, num(func() string { return fmtMs(k.FirstLatencyMs) }), num(func() string { return fmtMs(k.LastLatencyMs) }))
			}
			row = append(row, num(func() string { return fmtMs(k.AvgLatencyMs) }), num(func() string { return fmtMs(k.AvgJitterMs) }))
			if kt.layout == layoutSingleLast {
				row = append(row, num(func() string { return fmtPct(k.LastLatePct) }))
			}
			row = append(row, num(func() string { return fmtPct(k.AvgLatePct) }))
			if kt.layout == layoutMulti {
				row = append(row, bw(in))
			}
			row = append(row, bw(outBW),
				num(func() string { return fmtPct(k.LatePct) }), num(func() string { return fmtPct(k.LossPct) }),
				fmt.Sprintf("%.0f", p.DeliveredPPS), fmtRatio(p.ProbeFraction),
				fmt.Sprintf("%.0f", p.CPUBusyPct), fmt.Sprintf("%.0f", p.CPUStealPct), passCell(p))
			t.rows = append(t.rows, row)
		}
		out = append(out, t)
	}
	return out
}

func passCell(p Point) string {
	if p.Error != "" {
		e := p.Error
		if utf8.RuneCountInString(e) > 60 {
			e = string([]rune(e)[:57]) + "..."
		}
		return "ERROR: " + e
	}
	s := "FAIL"
	if p.Pass {
		s = "pass"
	}
	switch {
	case p.StealRerun:
		s += fmt.Sprintf(" (%.0f %% stolen: measured again)", p.CPUStealPct)
	case p.Rerun:
		s += " (second measurement)"
	}
	return s
}

func fmtMs(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtPct(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 0.01:
		return fmt.Sprintf("%.4f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtRatio(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}

// largest returns a system's largest passing size in a scenario and the
// smallest failing one, in participants: from the bisection's Max, or from
// the points when the run has none.
func largest(r Report, system, scenario string) (pass, fail int, ok bool) {
	for _, m := range r.Maxima {
		if m.System == system && m.Scenario == scenario {
			return m.Participants, m.FailedAt, true
		}
	}
	for _, p := range r.Points {
		if p.System != system || p.Scenario != scenario || p.StealRerun {
			continue
		}
		ok = true
		if p.Pass {
			pass = max(pass, p.Participants)
		} else if fail == 0 || p.Participants < fail {
			fail = p.Participants
		}
	}
	return pass, fail, ok
}

func summaryTable(r Report) table {
	sys := systemsOf(r)
	var peers []string
	for _, s := range sys {
		if s != "convene" {
			peers = append(peers, s)
		}
	}
	hasConvene := slices.Contains(sys, "convene")
	t := table{title: "Largest passing size (users in the seed's unit; first failing size in brackets)"}
	t.header = append([]string{"Scenario"}, sys...)
	t.header = append(t.header, "Seed (0 late, < 20 ms)", "Seed's text")
	if hasConvene {
		for _, p := range peers {
			t.header = append(t.header, "convene / "+p)
		}
		t.header = append(t.header, "convene / seed")
	}
	for _, sc := range allScenarios {
		row := []string{sc}
		sizes := map[string]int{}
		measured := false
		for _, s := range sys {
			pass, fail, ok := largest(r, s, sc)
			if !ok {
				row = append(row, "—")
				continue
			}
			measured = true
			sizes[s] = seedUnits(sc, pass)
			cell := strconv.Itoa(sizes[s])
			if pass == 0 {
				cell = "none passed"
			}
			if fail > 0 {
				cell += fmt.Sprintf(" (%d)", seedUnits(sc, fail))
			}
			row = append(row, cell)
		}
		if !measured {
			continue
		}
		sm, _ := seedMaxFor(sc)
		row = append(row, strconv.Itoa(sm.Users), strconv.Itoa(sm.Stated))
		if hasConvene {
			c, cok := sizes["convene"]
			ratio := func(d int, dok bool) string {
				if !cok || !dok || d == 0 {
					return "—"
				}
				return fmt.Sprintf("%.2f", float64(c)/float64(d))
			}
			for _, p := range peers {
				d, dok := sizes[p]
				row = append(row, ratio(d, dok))
			}
			row = append(row, ratio(sm.Users, true))
		}
		t.rows = append(t.rows, row)
	}
	return t
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
