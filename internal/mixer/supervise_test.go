package mixer

import (
	"errors"
	"math"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/codec"
	"github.com/convene/convene/internal/media"
	"github.com/convene/convene/internal/supervise"
)

// stamped records when an output's packets arrive.
type stamped struct {
	ear
	at chan time.Time
}

func (s *stamped) Deliver(pk *media.Packet, from *broker.Track) {
	s.ear.Deliver(pk, from)
	select {
	case s.at <- time.Now():
	default:
	}
}

// TestCrashedMixerIsRestarted: a mixer whose tick panics stops (the node
// does not), its beats stand still, the supervisor replaces it and the
// output hears the mix again, without attaching anew.
func TestCrashedMixerIsRestarted(t *testing.T) {
	sm := supervise.NewMetrics()
	sup, err := supervise.New(supervise.Options{Metrics: sm})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	m := NewMetrics()
	svc := NewService(Options{Metrics: m, Supervisor: sup})
	defer svc.Close()
	r := broker.NewRoom("s")
	a := &sender{t: join(t, r, "a", "alice"), freq: 440, amp: 8000}
	out := &stamped{at: make(chan time.Time, 1024)}
	detach, err := svc.Attach("s", "", r, &Output{ID: "bob", Owner: "bob", Codec: codec.PCMU, Sink: out})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				a.send()
			}
		}
	}()
	waitPackets(t, out, 25)
	if !svc.Crash("s", "") {
		t.Fatal("no mixer to crash")
	}
	// The output goes quiet, then hears the mix again.
	var last time.Time
	var gap time.Duration
	deadline := time.After(15 * time.Second)
	for gap == 0 {
		select {
		case at := <-out.at:
			if !last.IsZero() && at.Sub(last) > 200*time.Millisecond {
				gap = at.Sub(last)
			}
			last = at
		case <-deadline:
			t.Fatalf("the mix did not resume (crashes %v, restarts %v)",
				promtest.ToFloat64(m.panics), promtest.ToFloat64(m.restarts))
		}
	}
	if promtest.ToFloat64(m.panics) != 1 || promtest.ToFloat64(m.restarts) != 1 {
		t.Fatalf("crashes %v, restarts %v; want 1 and 1", promtest.ToFloat64(m.panics), promtest.ToFloat64(m.restarts))
	}
	if got := promtest.ToFloat64(sm.RestartsOf("mixer")); got != 1 {
		t.Fatalf("supervisor restarts %v, want 1", got)
	}
	t.Logf("the mix resumed %v after the last packet before the crash", gap)
	// The restarted mixer mixes: bob hears alice's 440 Hz again.
	before := len(out.heard())
	waitPackets(t, out, out.packets()+25)
	if share := audio.ToneShare(out.heard()[before:], 440, 8000); share < 0.5 {
		t.Fatalf("after the restart bob hears 440 Hz at %.2f of the energy", share)
	}
	if svc.Count() != 1 {
		t.Fatalf("%d mixers after the restart, want 1", svc.Count())
	}
}

func waitPackets(t *testing.T, e interface{ packets() int }, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.packets() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d packets heard, want %d", e.packets(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMeasuredCapacityRefusesAMixer: with the mixers' measured load at
// the configured cores, a new mixer is refused with the reason; an
// existing group still takes outputs.
func TestMeasuredCapacityRefusesAMixer(t *testing.T) {
	m := NewMetrics()
	svc := NewService(Options{Metrics: m, Cores: 0.01})
	defer svc.Close()
	r := broker.NewRoom("s")
	d1, err := svc.Attach("s", "g1", r, &Output{ID: "o1", Codec: codec.PCMU, Sink: &ear{}})
	if err != nil {
		t.Fatal(err)
	}
	defer d1()
	// The one mixer measures itself at a tenth of a core.
	svc.mu.Lock()
	svc.groups[key{"s", "g1"}].m.load.Store(math.Float64bits(0.1))
	svc.mu.Unlock()
	_, err = svc.Attach("s", "g2", r, &Output{ID: "o2", Codec: codec.PCMU, Sink: &ear{}})
	if !errors.Is(err, ErrCapacity) {
		t.Fatalf("second mixer: %v, want ErrCapacity", err)
	}
	t.Logf("refused: %v", err)
	if promtest.ToFloat64(m.refused) != 1 {
		t.Fatalf("refused counter %v", promtest.ToFloat64(m.refused))
	}
	d3, err := svc.Attach("s", "g1", r, &Output{ID: "o3", Codec: codec.PCMU, Sink: &ear{}})
	if err != nil {
		t.Fatalf("an output of a running mixer: %v", err)
	}
	d3()
}
