package supervise

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/convene/convene/internal/bus"
)

// svc is a service whose beats advance while alive.
type svc struct {
	beats    atomic.Uint64
	alive    atomic.Bool
	restarts atomic.Int32
}

func (s *svc) status(id string) func() Status {
	return func() Status {
		if s.alive.Load() {
			s.beats.Add(1)
		}
		return Status{Kind: "mixer", ID: id, Beats: s.beats.Load(), Load: 0.25}
	}
}

func (s *svc) restart() {
	s.restarts.Add(1)
	s.alive.Store(true)
}

// TestStoppedServiceIsRestartedOverNATS: reports travel over a real
// (embedded) NATS; the service whose beats stop is restarted once, the
// one that keeps beating is left alone, and Load sums the reports.
func TestStoppedServiceIsRestartedOverNATS(t *testing.T) {
	b, err := bus.Connect(context.Background(), bus.Options{NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := NewMetrics()
	s, err := New(Options{Bus: b, Interval: 20 * time.Millisecond, Stale: 100 * time.Millisecond, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var live, stuck svc
	live.alive.Store(true)
	stuck.alive.Store(true)
	defer s.Add("mixer", "live", live.status("live"), live.restart)()
	defer s.Add("mixer", "stuck", stuck.status("stuck"), stuck.restart)()
	waitFor(t, func() bool { return s.Load("mixer") == 0.5 })
	stuck.alive.Store(false)
	waitFor(t, func() bool { return stuck.restarts.Load() == 1 })
	time.Sleep(300 * time.Millisecond) // it beats again: no second restart
	if n := stuck.restarts.Load(); n != 1 {
		t.Fatalf("stuck restarted %d times, want 1", n)
	}
	if n := live.restarts.Load(); n != 0 {
		t.Fatalf("live restarted %d times", n)
	}
	if got := promtest.ToFloat64(m.RestartsOf("mixer")); got != 1 {
		t.Fatalf("restarts metric %v", got)
	}
}

// TestNoReportsRestartNothing: when reports stop arriving (the control
// plane is down), liveness cannot be judged and nothing is restarted.
func TestNoReportsRestartNothing(t *testing.T) {
	s := &Supervisor{o: Options{Stale: 100 * time.Millisecond, Metrics: NewMetrics(), Logger: nil}, svcs: map[string]*entry{}}
	s.o.Logger = discard()
	var x svc
	s.Add("mixer", "x", x.status("x"), x.restart)
	now := time.Now()
	s.judge(Report{Services: []Status{{Kind: "mixer", ID: "x", Beats: 1}}}, now)
	// No report for ten seconds, then one that shows it beating again.
	s.judge(Report{Services: []Status{{Kind: "mixer", ID: "x", Beats: 2}}}, now.Add(10*time.Second))
	// Stuck for less than Stale between two reports.
	s.judge(Report{Services: []Status{{Kind: "mixer", ID: "x", Beats: 2}}}, now.Add(10*time.Second+50*time.Millisecond))
	time.Sleep(10 * time.Millisecond)
	if n := x.restarts.Load(); n != 0 {
		t.Fatalf("restarted %d times without evidence", n)
	}
	s.judge(Report{Services: []Status{{Kind: "mixer", ID: "x", Beats: 2}}}, now.Add(10*time.Second+150*time.Millisecond))
	waitFor(t, func() bool { return x.restarts.Load() == 1 })
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
