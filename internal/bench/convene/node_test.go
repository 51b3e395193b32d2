package convene

import (
	"encoding/json"
	"math"
	"testing"
)

// TestHistogramPctPastTheLastBucket: a percentile in the +Inf bucket is
// "more than the last finite bound", a finite number JSON can carry (a
// run's report was once lost to "json: unsupported value: +Inf").
func TestHistogramPctPastTheLastBucket(t *testing.T) {
	a := map[float64]float64{0.01: 0, 0.5: 0, math.Inf(1): 0}
	b := map[float64]float64{0.01: 10, 0.5: 20, math.Inf(1): 100}
	got := HistogramPct(a, b, 0.95)
	if got != -500 || BoundMs(got) != "> 500" {
		t.Fatalf("p95 past the last bucket: %v (%q), want -500 (\"> 500\")", got, BoundMs(got))
	}
	if _, err := json.Marshal(got); err != nil {
		t.Fatal(err)
	}
	if got := HistogramPct(a, b, 0.1); got != 10 || BoundMs(got) != "≤ 10" {
		t.Fatalf("p10: %v (%q), want 10", got, BoundMs(got))
	}
	if got := HistogramPct(b, b, 0.5); got != 0 || BoundMs(got) != "–" {
		t.Fatalf("nothing counted: %v (%q)", got, BoundMs(got))
	}
}
