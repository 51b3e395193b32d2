package floorbench

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func TestSummarizeAndReport(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*10*time.Microsecond)
	}
	s := summarize(ds)
	if s.N != 100 || s.P50 != 0.51 || s.P99 != 1.0 || s.Max != 1.0 {
		t.Fatalf("%+v", s)
	}
	r := Result{Date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Grant: Stats{N: 1, P50: 0.1, P99: 0.5},
		Handover: Stats{N: 1, P50: 0.3, P99: 2}, Create: Stats{N: 1, P50: 0.5}}
	tab := Table(r)
	if strings.Count(tab, "| met |") != 2 || strings.Count(tab, "MISSED") != 1 {
		t.Fatalf("verdicts:\n%s", tab)
	}
	dir := t.TempDir()
	md, err := Write(dir, r)
	if err != nil || !strings.HasSuffix(md, "2026-01-02-030405-floor.md") {
		t.Fatalf("%s %v", md, err)
	}
	var back Result
	b, _ := os.ReadFile(strings.TrimSuffix(md, ".md") + ".json")
	if err := json.Unmarshal(b, &back); err != nil || back.Handover.P99 != 2 {
		t.Fatalf("json: %+v %v", back, err)
	}
}
