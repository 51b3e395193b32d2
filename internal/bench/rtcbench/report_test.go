package rtcbench

import (
	"strings"
	"testing"
	"time"
)

// TestEgressCountsStepsAtTheBar: the egress per core the report quotes is
// the best of the steps that passed, never a failed step's (an earlier
// report quoted 68,754 from a step where 7 subscribers never joined).
func TestEgressCountsStepsAtTheBar(t *testing.T) {
	res := Result{Date: time.Unix(0, 0), CPUs: 2, Window: "10s", Series: []Series{{
		System: "convene", Scenario: "audio", MaxOK: 800,
		Points: []Point{{N: 800, PPSPerCore: 66281, OK: true}, {N: 1000, PPSPerCore: 80000}},
	}}}
	out := Format(res)
	if !strings.Contains(out, "up to **66281 packets/s per core**") {
		t.Fatalf("the passing step's egress is not the one quoted:\n%s", out)
	}
	if !strings.Contains(out, "80000 in a step that missed the bar, not counted") {
		t.Fatalf("the failed step's egress is not set apart:\n%s", out)
	}
}
