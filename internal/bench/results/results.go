// Package results writes the benchmarks' reports the one way they share:
// <dir>/<date>-<name>.md for people and .json beside it for tools, with
// the helpers their tables have in common.
package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// Write saves md as <dir>/<date>-<name>.md and res as JSON in .json
// beside it, and returns the .md path.
func Write(dir string, date time.Time, name string, res any, md string) (string, error) {
	stem := filepath.Join(dir, date.Format("2006-01-02-150405")+"-"+name)
	j, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(stem+".json", j, 0o644); err != nil {
		return "", err
	}
	return stem + ".md", os.WriteFile(stem+".md", []byte(md), 0o644)
}

// Pass renders a step's pass column: yes, or a bold no.
func Pass(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// Run is what the report of a benchmark that steps its load up says of
// the run as a whole (its JSON is flat in the report's).
type Run struct {
	Date   time.Time `json:"date"`
	CPUs   int       `json:"cpus"`
	Warmup string    `json:"warmup"`
	Window string    `json:"window"`
	// Pinned: each server ran on a CPU of its own, the load on the others.
	Pinned bool `json:"pinned"`
	// Nice is the servers' niceness, 0 when left alone.
	Nice int `json:"nice,omitempty"`
}

// NewRun describes a run starting now.
func NewRun(warmup, window time.Duration, nice int) Run {
	return Run{Date: time.Now().UTC(), CPUs: runtime.NumCPU(), Warmup: warmup.String(), Window: window.String(), Nice: nice}
}

// OthersMax is how much CPU, in cores, other processes may take during a
// step that missed its bar before the step is measured again (see Tries).
const OthersMax = 0.3

// TriesNote says in a report how Tries measures a step again.
var TriesNote = fmt.Sprintf("a step that misses the bar is measured again once, and twice more while others took over %.1f of a core", OthersMax)

// Tries measures a step until it passes, for every system alike: once
// more when it misses the bar (a transient is not the limit), and up to
// twice more while other processes on a shared machine took more than
// OthersMax cores. measure makes one try (retry for all but the first);
// pass and others read a try; more says whether there is time for
// another. It returns the tries in order: the last is the step's answer.
func Tries[P any](measure func(retry bool) P, pass func(P) bool, others func(P) float64, more func() bool) []P {
	ps := []P{measure(false)}
	for try := 1; ; try++ {
		p := ps[len(ps)-1]
		if pass(p) || (try > 1 && (try >= 4 || others(p) <= OthersMax)) || !more() {
			return ps
		}
		ps = append(ps, measure(true))
	}
}

// Share is part / whole, 0 when whole is 0: the frames received of those
// due, the late of those received.
func Share(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}
