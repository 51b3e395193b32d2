package brokerbench

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/testutil"
)

// TestPointsOnBothSystems drives a small audio and video meeting through a
// real convene process and a real nats-server, and checks the arithmetic
// of the point: every counted packet arrives, nothing is lost or foreign.
// No timing is asserted.
func TestPointsOnBothSystems(t *testing.T) {
	testutil.NeedBinary(t, "nats-server")
	bin := filepath.Join(t.TempDir(), "convene")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/convene/convene/cmd/convene").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	conv, err := StartConvene(bin, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer conv.Stop()
	nats, err := StartNATS(false)
	if err != nil {
		t.Fatal(err)
	}
	defer nats.Stop()
	meetings := []Meeting{{loadgen.Audio, 8}, {loadgen.Video, 8}}
	for _, sys := range []System{conv, nats} {
		pt := RunPoint(context.Background(), sys, "test", meetings, 4*time.Second)
		if pt.Error != "" {
			t.Fatalf("%s: %s", sys.Name(), pt.Error)
		}
		if pt.Participants != 18 || pt.Meetings != 2 || len(pt.Kinds) != 2 {
			t.Fatalf("%s: point %+v", sys.Name(), pt)
		}
		for _, k := range pt.Kinds {
			if k.LossPct != 0 || k.OutMbps <= 0 {
				t.Errorf("%s %s: loss %.3f %% out %.2f Mb/s", sys.Name(), k.Kind, k.LossPct, k.OutMbps)
			}
		}
		if len(pt.Subscribers) != 16 || pt.DeliveredPPS <= 0 {
			t.Errorf("%s: %d subscribers reported, %.0f pkt/s", sys.Name(), len(pt.Subscribers), pt.DeliveredPPS)
		}
		t.Logf("%s: %s", sys.Name(), verdict(pt))
	}
}

func TestBracket(t *testing.T) {
	sc := scenario{start: 1000, cap: 24000, resolution: 250}
	b := &bracket{maxSteps: 20, cap: sc.cap}
	// A system that passes up to 5000.
	var tried []int
	for x := b.next(sc); x != 0; x = b.next(sc) {
		tried = append(tried, x)
		b.steps++
		if x <= 5000 {
			b.lo = x
		} else {
			b.hi = x
		}
	}
	if b.lo < 4500 || b.lo > 5000 || b.hi <= 5000 || b.hi-b.lo > 500 {
		t.Fatalf("bracket [%d, %d] after %v", b.lo, b.hi, tried)
	}
	// A system that fails at the start goes down.
	b = &bracket{maxSteps: 20, cap: sc.cap}
	for x := b.next(sc); x != 0; x = b.next(sc) {
		b.steps++
		if x <= 300 {
			b.lo = x
		} else {
			b.hi = x
		}
	}
	if b.lo == 0 || b.lo > 300 {
		t.Fatalf("bracket [%d, %d]", b.lo, b.hi)
	}
	// A system capped below the start (the open-file limit) never tries
	// more than its cap, even when it passes everything.
	b = &bracket{maxSteps: 20, cap: 700}
	for x := b.next(sc); x != 0; x = b.next(sc) {
		if x > 700 {
			t.Fatalf("tried %d above the cap", x)
		}
		b.steps++
		b.lo = x
	}
	if b.lo != 700 {
		t.Fatalf("capped system ended at %d, want 700", b.lo)
	}
}

func TestNearestProbe(t *testing.T) {
	ps := []Probe{{Subscribers: 1000, DeliveredPPS: 1}, {Subscribers: 4000, DeliveredPPS: 2}, {Subscribers: 16000, DeliveredPPS: 3}, {Subscribers: 1000, DeliveredPPS: 9}}
	for n, want := range map[int]float64{10: 1, 1900: 1, 2100: 2, 6000: 2, 9000: 3, 50000: 3} {
		if p, ok := nearestProbe(ps, n); !ok || p.DeliveredPPS != want {
			t.Errorf("n=%d: got %+v", n, p)
		}
	}
	if _, ok := nearestProbe(nil, 5); ok {
		t.Error("no probes, yet one found")
	}
}

func TestMeasureRerunsOnlyStolenFailures(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		first Point
		runs  int
	}{
		{"pass", Point{Pass: true, CPUStealPct: 50}, 1},
		{"fail, little steal", Point{CPUStealPct: StealRerunPct}, 1},
		{"error", Point{Error: "boom", CPUStealPct: 50}, 1},
		{"fail, stolen", Point{CPUStealPct: StealRerunPct + 1}, 2},
	} {
		n := 0
		pts := measurePoint(ctx, func() Point {
			n++
			if n == 1 {
				return c.first
			}
			return Point{Pass: true}
		})
		if n != c.runs || len(pts) != c.runs {
			t.Errorf("%s: ran %d times, %d points; want %d", c.name, n, len(pts), c.runs)
			continue
		}
		if c.runs == 2 && (!pts[0].StealRerun || pts[0].Pass || !pts[1].Rerun || !pts[1].Pass) {
			t.Errorf("%s: points %+v", c.name, pts)
		}
	}
	// A rerun that fails again stands: the bisection sees the failure.
	pts := measurePoint(ctx, func() Point { return Point{CPUStealPct: 40} })
	if len(pts) != 2 || pts[1].Pass || !pts[1].Rerun {
		t.Errorf("failed twice: %+v", pts)
	}
	// The largest passing size ignores the superseded failure.
	r := Report{Points: []Point{
		{System: "s", Scenario: "x", Participants: 100, Pass: true},
		{System: "s", Scenario: "x", Participants: 200, StealRerun: true},
		{System: "s", Scenario: "x", Participants: 200, Pass: true, Rerun: true},
		{System: "s", Scenario: "x", Participants: 400},
	}}
	if pass, fail, _ := largest(r, "s", "x"); pass != 200 || fail != 400 {
		t.Errorf("largest: pass %d fail %d, want 200 and 400", pass, fail)
	}
	if got := passCell(r.Points[1]); !strings.Contains(got, "measured again") {
		t.Errorf("passCell of a superseded point: %q", got)
	}
}
