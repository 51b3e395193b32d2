package brokerbench

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/bench/proc"
)

// scenario is one of the seed's tests: x is listeners per meeting for the
// single-meeting tests and the number of meetings for the multi-meeting ones.
type scenario struct {
	name       string
	start, cap int
	resolution int // stop bisecting when the bracket is this narrow (or 10 %)
	plan       func(x int) []Meeting
	duration   func(quick bool) time.Duration
	// target is the least passing participant count the issue asks of
	// Convene (0: none).
	target int
}

func audioDur(q bool) time.Duration {
	if q {
		return 6 * time.Second
	}
	return 12 * time.Second
}

func videoDur(q bool) time.Duration {
	if q {
		return 5 * time.Second
	}
	return 10 * time.Second
}

func scenarios() []scenario {
	return []scenario{
		{name: ScenarioAudio, start: 1000, cap: 24000, resolution: 250, duration: audioDur, target: 6000 + 1,
			plan: func(x int) []Meeting { return []Meeting{{loadgen.Audio, x}} }},
		{name: ScenarioVideo, start: 400, cap: 8000, resolution: 100, duration: videoDur, target: 1500 + 1,
			plan: func(x int) []Meeting { return []Meeting{{loadgen.Video, x}} }},
		{name: ScenarioCombined, start: 400, cap: 8000, resolution: 100, duration: audioDur,
			plan: func(x int) []Meeting { return []Meeting{{loadgen.Audio, x}, {loadgen.Video, x}} }},
		{name: ScenarioMultiVideo, start: 20, cap: 600, resolution: 5, duration: videoDur, target: 2500,
			plan: func(x int) []Meeting { return repeat(Meeting{loadgen.Video, 19}, x) }},
		{name: ScenarioMultiCombined, start: 20, cap: 800, resolution: 4, duration: audioDur,
			plan: func(x int) []Meeting {
				return append(repeat(Meeting{loadgen.Audio, 19}, x/2), repeat(Meeting{loadgen.Video, 19}, x-x/2)...)
			}},
	}
}

func repeat(m Meeting, n int) []Meeting {
	out := make([]Meeting, n)
	for i := range out {
		out[i] = m
	}
	return out
}

// bracket is the state of one system's bisection in one scenario.
type bracket struct {
	lo, hi   int // largest passing x, smallest failing x (0: none yet)
	loPart   int // participants at lo
	hiPart   int
	steps    int
	maxSteps int
	cap      int // largest x to try
}

// Limited is a System whose listeners each need an open file (a TCP
// connection), so the open-file limit caps its meetings.
type Limited interface {
	FilePerListener() bool
}

// next returns the next x to try, or 0 when done.
func (b *bracket) next(s scenario) int {
	if b.steps >= b.maxSteps {
		return 0
	}
	switch {
	case b.hi == 0 && b.lo == 0:
		return min(s.start, b.cap)
	case b.hi == 0:
		if b.lo >= b.cap {
			return 0
		}
		return min(b.lo*2, b.cap)
	case b.lo == 0:
		if b.hi <= 1 {
			return 0
		}
		return b.hi / 2
	}
	if b.hi-b.lo <= max(s.resolution, b.lo/10) {
		return 0
	}
	return (b.lo + b.hi) / 2
}

// Options of a suite run.
type Options struct {
	Quick     bool
	Scenarios []string // empty: all
	OutDir    string
	Log       func(format string, args ...any)
	// MaxListeners caps a point's listeners on systems that need an open
	// file per listener (see Limited); 0: no cap.
	MaxListeners int
	Progress     *Progress
}

// Run measures every scenario on every system, alternating between them at
// each bisection step so that drift of the machine hits all alike.
//
// probe measures the machine's fan-out limit to n subscribers. It runs for
// several sizes first, because the kernel's cost per datagram grows with
// the number of sockets it delivers to; each point is compared with the
// probe of the nearest size.
func Run(ctx context.Context, systems []System, probe func(n int) (Probe, error), o Options) Report {
	r := Report{Started: time.Now(), Quick: o.Quick, Host: hostDescription()}
	measure := probe
	probe = func(n int) (Probe, error) {
		before, _ := proc.ReadCPU()
		p, err := measure(n)
		if after, e := proc.ReadCPU(); e == nil {
			_, p.CPUStealPct = after.Since(before)
		}
		return p, err
	}
	sizes := []int{1000, 2000, 4000, 8000, 16000}
	if o.Quick {
		sizes = []int{1000, 4000, 16000}
	}
	for _, n := range sizes {
		if p, err := probe(n); err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("probe at %d subscribers failed: %v", n, err))
		} else {
			r.Probes = append(r.Probes, p)
		}
	}
	maxSteps := 7
	if o.Quick {
		maxSteps = 3
	}
	var conv *Convene
	for _, s := range systems {
		if c, ok := s.(*Convene); ok {
			conv = c
		}
	}
	for _, sc := range scenarios() {
		if !selected(sc.name, o.Scenarios) {
			continue
		}
		br := make([]*bracket, len(systems))
		for i, sys := range systems {
			br[i] = &bracket{maxSteps: maxSteps, cap: sc.cap}
			if l, ok := sys.(Limited); ok && l.FilePerListener() && o.MaxListeners > 0 {
				for br[i].cap > 1 && total(sc.plan(br[i].cap)) > o.MaxListeners {
					br[i].cap = br[i].cap * 9 / 10
				}
			}
		}
		for active := true; active && ctx.Err() == nil; {
			active = false
			for i, sys := range systems {
				x := br[i].next(sc)
				if x == 0 {
					continue
				}
				active = true
				meetings := sc.plan(x)
				if o.Progress != nil {
					o.Progress.Step(fmt.Sprintf("%s %s x=%d", sc.name, sys.Name(), x), 0)
				}
				run := func() Point {
					pt := RunPoint(ctx, sys, sc.name, meetings, sc.duration(o.Quick))
					if p, ok := nearestProbe(r.Probes, pt.Participants-pt.Meetings); ok && p.DeliveredPPS > 0 {
						pt.ProbeFraction = pt.DeliveredPPS / p.DeliveredPPS
					}
					return pt
				}
				var pt Point
				for _, pt = range measurePoint(ctx, run) {
					r.Points = append(r.Points, pt)
					o.Log("%-18s %-12s x=%-6d participants=%-6d %s", sc.name, sys.Name(), x, pt.Participants, verdict(pt))
				}
				br[i].steps++
				if pt.Pass {
					br[i].lo, br[i].loPart = x, pt.Participants
				} else {
					br[i].hi, br[i].hiPart = x, pt.Participants
				}
			}
		}
		for i, sys := range systems {
			r.Maxima = append(r.Maxima, Max{System: sys.Name(), Scenario: sc.name, Participants: br[i].loPart,
				Meetings: meetingsAt(sc, br[i].lo), FailedAt: br[i].hiPart})
		}
		// Where the time goes: profile Convene at the knee.
		for i, sys := range systems {
			if sys != System(conv) || br[i].hi == 0 || o.OutDir == "" || ctx.Err() != nil {
				continue
			}
			path := fmt.Sprintf("%s/%s-%s-knee.pprof", o.OutDir, r.Started.UTC().Format("2006-01-02-150405"), sc.name)
			d := sc.duration(o.Quick)
			errc := make(chan error, 1)
			go func() {
				time.Sleep(d / 3)
				errc <- conv.Profile(int(d/time.Second)/2, path)
			}()
			pt := RunPoint(ctx, sys, sc.name, sc.plan(br[i].hi), d)
			if p, ok := nearestProbe(r.Probes, pt.Participants-pt.Meetings); ok && p.DeliveredPPS > 0 {
				pt.ProbeFraction = pt.DeliveredPPS / p.DeliveredPPS
			}
			if err := <-errc; err != nil {
				r.Notes = append(r.Notes, fmt.Sprintf("%s: profile at the knee failed: %v", sc.name, err))
			} else {
				r.Notes = append(r.Notes, fmt.Sprintf("%s: CPU profile of convene at %d participants (%s): %s",
					sc.name, pt.Participants, verdict(pt), path))
			}
		}
	}
	// Once more at the end, to show how far the machine drifted.
	if p, err := probe(sizes[0]); err == nil {
		r.Probes = append(r.Probes, p)
	}
	r.Notes = append(r.Notes, targetNotes(r)...)
	r.Finished = time.Now()
	return r
}

// measurePoint runs a point and, when it failed while more than StealRerunPct
// of the CPU was stolen, runs it once more. It returns the points
// measured; the last one decides.
func measurePoint(ctx context.Context, run func() Point) []Point {
	pt := run()
	if pt.Pass || pt.Error != "" || pt.CPUStealPct <= StealRerunPct || ctx.Err() != nil {
		return []Point{pt}
	}
	pt.StealRerun = true
	again := run()
	again.Rerun = true
	return []Point{pt, again}
}

// nearestProbe returns the probe whose subscriber count is closest to n on
// a log scale (the first one measured for that count).
func nearestProbe(ps []Probe, n int) (Probe, bool) {
	best, bestD := Probe{}, math.Inf(1)
	for _, p := range ps {
		d := math.Abs(math.Log(float64(p.Subscribers)) - math.Log(float64(max(n, 1))))
		if d < bestD {
			best, bestD = p, d
		}
	}
	return best, !math.IsInf(bestD, 1)
}

func meetingsAt(sc scenario, x int) int {
	if x == 0 {
		return 0
	}
	return len(sc.plan(x))
}

func selected(name string, list []string) bool {
	if len(list) == 0 {
		return true
	}
	for _, s := range list {
		if s == name {
			return true
		}
	}
	return false
}

func verdict(pt Point) string {
	if pt.Error != "" {
		return "ERROR " + pt.Error
	}
	s := "FAIL"
	if pt.Pass {
		s = "pass"
	}
	for _, k := range pt.Kinds {
		s += fmt.Sprintf(" %s: avg %.1f ms, jitter %.2f ms, late %.3f %%, loss %.3f %%", k.Kind, k.AvgLatencyMs, k.AvgJitterMs, k.LatePct, k.LossPct)
	}
	return s + fmt.Sprintf(", delivered %.0f pkt/s (%.2f × probe), CPU busy %.0f %%, stolen %.0f %%",
		pt.DeliveredPPS, pt.ProbeFraction, pt.CPUBusyPct, pt.CPUStealPct)
}

// targetNotes says which of the targets were met, and by how much
// the others were missed.
func targetNotes(r Report) []string {
	var notes []string
	get := func(sys, sc string) (Max, bool) {
		for _, m := range r.Maxima {
			if m.System == sys && m.Scenario == sc {
				return m, true
			}
		}
		return Max{}, false
	}
	for _, sc := range scenarios() {
		if sc.target == 0 {
			continue
		}
		m, ok := get("convene", sc.name)
		if !ok {
			continue
		}
		state := "met"
		if m.Participants < sc.target {
			state = fmt.Sprintf("MISSED by %d (%.0f %% of target)", sc.target-m.Participants, 100*float64(m.Participants)/float64(sc.target))
		}
		notes = append(notes, fmt.Sprintf("target %s ≥ %d participants: convene %d — %s", sc.name, sc.target, m.Participants, state))
	}
	if c, ok := get("convene", ScenarioAudio); ok {
		if n, ok := get("nats-server", ScenarioAudio); ok && n.Participants > 0 {
			ratio := float64(c.Participants) / float64(n.Participants)
			state := "met"
			if ratio < 2 {
				state = "MISSED"
			}
			notes = append(notes, fmt.Sprintf("target single-audio ≥ 2 × nats-server: %.2f × (%d vs %d) — %s", ratio, c.Participants, n.Participants, state))
		}
		for _, pt := range r.Points {
			if pt.System == "convene" && pt.Scenario == ScenarioAudio && pt.Participants == c.Participants && pt.Pass {
				state := "met"
				if pt.ProbeFraction < 0.8 {
					state = "MISSED"
				}
				notes = append(notes, fmt.Sprintf("target delivered packets/s at the single-audio maximum ≥ 0.8 × probe: %.2f × — %s", pt.ProbeFraction, state))
				break
			}
		}
	}
	return notes
}

func hostDescription() string {
	h, _ := os.Hostname()
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if len(line) > 10 && line[:10] == "model name" {
				if i := strings.IndexByte(line, ':'); i > 0 {
					cpu = line[i+2:]
				}
				break
			}
		}
	}
	return fmt.Sprintf("%s, %s, %d logical CPUs", h, cpu, runtime.NumCPU())
}
