package mixbench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/bench/results"
)

// Targets of issue 14: G.711 sessions of 10 members per core, and the
// ratio to Janus AudioBridge's count on the same machine.
const (
	TargetPerCore = 100
	TargetRatio   = 1.5
)

var codecTitle = map[string]string{
	"g711": "G.711 μ-law (PCMU, 8 kHz)",
	"opus": "Opus (48 kHz, mono, 20 ms)",
}

// Format renders the run as Markdown.
func Format(res Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Audio mixing beside Janus AudioBridge, %s\n\n", res.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "S sessions of %d members, %d of them speaking (a tone with a 4 Hz syllable envelope, pre-encoded, replayed every 20 ms; "+
		"the %d others send one frame of silence when they join and nothing after), every member a plain RTP endpoint that receives its mix; "+
		"%d CPUs; each step measured over %s after %s of warm-up.\n\n",
		MembersPerSession, SpeakersPerSession, MembersPerSession-SpeakersPerSession, res.CPUs, res.Window, res.Warmup)
	fmt.Fprintf(&b, "A mixed frame is due at its place on the 20 ms grid of its RTP timestamps, anchored at the receiver's earliest arrival "+
		"relative to its timestamp; it is late when it arrives more than %d ms after that. "+
		"A step passes when the receivers together got ≥ %.1f%% of the frames expected (50 a second each), ≤ %.1f%% of them late, "+
		"and no receiver got under %.0f%% of its own.\n\n",
		LateAfter.Milliseconds(), 100*Bar.MinReceived, 100*Bar.MaxLate, 100*Bar.StarvedBelow)
	for _, codec := range []string{"g711", "opus"} {
		var ss []Series
		for _, s := range res.Series {
			if s.Codec == codec {
				ss = append(ss, s)
			}
		}
		if len(ss) == 0 {
			continue
		}
		fmt.Fprintf(&b, "## %s\n\n", codecTitle[codec])
		b.WriteString("| system | sessions | frames received | late | starved | jitter mean / max ms | latest ms | server CPU (cores) | CPU ms/s per session | sessions per core | load's CPU (cores) | machine busy / steal | others' CPU (cores) | mixer's missed ticks | pass |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, s := range ss {
			for _, p := range s.Points {
				n := strconv.Itoa(p.Sessions)
				if p.Retry {
					n += " (again)"
				}
				q := p.Quality
				missed := "–"
				if p.MissedTicks >= 0 {
					missed = fmt.Sprintf("%.0f", p.MissedTicks)
				}
				fmt.Fprintf(&b, "| %s | %s | %.2f%% | %.2f%% | %d | %.2f / %.2f | %.0f | %.3f | %.2f | %.0f | %.2f | %.0f%% / %.0f%% | %.2f | %s | %s |\n",
					s.System, n, 100*q.ReceivedShare(), 100*q.LateShare(), q.Starved, q.JitterMean, q.JitterMax, q.LateMax,
					p.CPU, p.CPUPerSession, p.PerCore, p.LoadCPU, p.MachineBusy, p.Steal, p.Others, missed, results.Pass(p.OK))
			}
		}
		b.WriteString("\n")
		for _, s := range ss {
			fmt.Fprintf(&b, "- %s (%s): **%d sessions** at the bar", s.System, s.Version, s.MaxOK)
			if s.MaxOK > 0 {
				fmt.Fprintf(&b, ", %.0f sessions per core there", s.PerCore)
			}
			if s.Note != "" {
				fmt.Fprintf(&b, " — %s", s.Note)
			}
			b.WriteString("\n")
		}
		if c, j := find(ss, "convene"), find(ss, "janus"); c != nil && j != nil && j.MaxOK > 0 {
			fmt.Fprintf(&b, "- Convene / Janus AudioBridge sessions: **%.2f×** (target %.1f×)\n", float64(c.MaxOK)/float64(j.MaxOK), TargetRatio)
		}
		if c := find(ss, "convene"); c != nil && codec == "g711" {
			fmt.Fprintf(&b, "- Convene G.711 sessions per core at its most: **%.0f** (target %d)\n", c.PerCore, TargetPerCore)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\"others' CPU\" is what neither the server nor the load used over the window (other work on a shared machine); %s.\n\n", results.TriesNote)
	b.WriteString("\"mixer's missed ticks\" is Convene's convene_mixer_missed_ticks_total over the window (frames its mixers skipped: a mixer woken late makes the frames it owes, up to five at once, and skips the rest); Janus does not say.\n\n")
	if res.Pinned {
		fmt.Fprintf(&b, "Each server ran on CPU %d alone (taskset); the members (this benchmark's process) on the other CPUs. "+
			"\"sessions per core\" is sessions / the server's CPU over the window: what a whole core would carry at that load, if it scales.\n\n", proc.ServerCPU)
	}
	if res.Nice != 0 {
		fmt.Fprintf(&b, "Both servers ran at niceness %d, so that other work on a shared machine took less of their CPU (and neither more than the other for having more threads); on a quiet machine it changes nothing.\n\n", res.Nice)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

func find(ss []Series, name string) *Series {
	for i := range ss {
		if ss[i].System == name {
			return &ss[i]
		}
	}
	return nil
}

// Write saves <dir>/<date>-mixer.md and .json and returns the .md path.
func Write(dir string, res Result) (string, error) {
	return results.Write(dir, res.Date, "mixer", res, Format(res))
}
