package registry

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/convene/convene/internal/bus"
)

// fakeWatcher hands the registry's callback to the test, which plays the
// node events; fakeClock is the registry's clock.
type fakeWatcher struct {
	fn      func(bus.NodeStatus)
	stopped bool
}

func (w *fakeWatcher) WatchNodes(fn func(bus.NodeStatus)) (func(), error) {
	w.fn = fn
	return func() { w.stopped = true }, nil
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTest(t *testing.T) (*Registry, *fakeWatcher, *fakeClock) {
	t.Helper()
	w, clk := &fakeWatcher{}, &fakeClock{t: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)}
	r, err := New(Options{Watcher: w, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, w, clk
}

func beat(id string, sessions int, uptime float64) bus.NodeStatus {
	return bus.NodeStatus{NodeID: id, Type: bus.EventHeartbeat, Heartbeat: bus.Heartbeat{
		Load:          bus.Load{Sessions: sessions, Links: 2 * sessions, CapacityPPS: 10000},
		Rates:         bus.Rates{PacketsInPerSecond: 50, PacketsOutPerSecond: 450, CPUCores: 0.25},
		UptimeSeconds: uptime}}
}

func byID(r *Registry) map[string]Node {
	out := map[string]Node{}
	for _, n := range r.Nodes() {
		out[n.ID] = n
	}
	return out
}

func TestStaleAfterFiveSeconds(t *testing.T) {
	r, w, clk := newTest(t)
	w.fn(beat("a", 1, 10))
	w.fn(beat("b", 3, 10))
	for i := 0; i < 2; i++ { // a beats every 2 s, b falls silent
		clk.add(2 * time.Second)
		w.fn(beat("a", 1, 12+2*float64(i)))
	}
	clk.add(900 * time.Millisecond) // 4.9 s after b's last beat
	ns := byID(r)
	if ns["a"].Stale || ns["b"].Stale {
		t.Fatalf("stale before 5 s: %+v", ns)
	}
	if ns["b"].Heartbeat.Sessions != 3 || ns["b"].Heartbeat.CapacityPPS != 10000 || ns["b"].State != StateUp {
		t.Errorf("b = %+v", ns["b"])
	}
	clk.add(100 * time.Millisecond)
	ns = byID(r)
	if ns["a"].Stale || !ns["b"].Stale || ns["b"].AgeSeconds != 5 {
		t.Errorf("at 5 s: a stale=%v, b stale=%v age=%v; want b alone stale, 5 s", ns["a"].Stale, ns["b"].Stale, ns["b"].AgeSeconds)
	}
	// A heartbeat brings it back.
	w.fn(beat("b", 0, 1))
	if byID(r)["b"].Stale {
		t.Error("b still stale after a heartbeat")
	}
	// Forgotten after 5 minutes of silence.
	clk.add(5 * time.Minute)
	w.fn(beat("a", 1, 400))
	if ns := byID(r); len(ns) != 1 || ns["a"].ID != "a" {
		t.Errorf("after 5 min: %v, want only a", ns)
	}
}

func TestDrainingAndStopped(t *testing.T) {
	r, w, _ := newTest(t)
	w.fn(beat("a", 1, 10))
	w.fn(bus.NodeStatus{NodeID: "a", Type: bus.EventDraining})
	w.fn(beat("a", 1, 12))
	if n := byID(r)["a"]; n.State != StateDraining || n.Stale {
		t.Errorf("draining node beating: %+v", n)
	}
	w.fn(bus.NodeStatus{NodeID: "a", Type: bus.EventStopped})
	if n := byID(r)["a"]; n.State != StateStopped {
		t.Errorf("after stopped: %+v", n)
	}
	// The same ID starts again: a heartbeat with a lower uptime.
	w.fn(bus.NodeStatus{NodeID: "a", Type: bus.EventDraining})
	w.fn(beat("a", 0, 1))
	if n := byID(r)["a"]; n.State != StateUp {
		t.Errorf("restarted node: %+v", n)
	}
	// Heard only "stopped": listed, stale.
	w.fn(bus.NodeStatus{NodeID: "z", Type: bus.EventStopped})
	if n := byID(r)["z"]; n.State != StateStopped || !n.Stale {
		t.Errorf("z = %+v", n)
	}
	r.Close()
	if !w.stopped {
		t.Error("Close did not stop the watch")
	}
}

func TestMetrics(t *testing.T) {
	r, w, clk := newTest(t)
	w.fn(beat("a", 2, 10))
	w.fn(beat("b", 1, 10))
	clk.add(2 * time.Second)
	w.fn(beat("a", 2, 12))
	clk.add(4 * time.Second)
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.Collector())
	want := `
# HELP convene_registry_node_sessions Sessions with media on the node, from its heartbeat.
# TYPE convene_registry_node_sessions gauge
convene_registry_node_sessions{node="a"} 2
convene_registry_node_sessions{node="b"} 1
# HELP convene_registry_node_stale 1 when the node's heartbeats stopped (none for 5 s).
# TYPE convene_registry_node_stale gauge
convene_registry_node_stale{node="a"} 0
convene_registry_node_stale{node="b"} 1
# HELP convene_registry_nodes Nodes in the registry, by state (up, draining, stopped, stale).
# TYPE convene_registry_nodes gauge
convene_registry_nodes{state="draining"} 0
convene_registry_nodes{state="stale"} 1
convene_registry_nodes{state="stopped"} 0
convene_registry_nodes{state="up"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"convene_registry_nodes", "convene_registry_node_stale", "convene_registry_node_sessions"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "convene_registry_node_packets_per_second"); err != nil || n != 4 {
		t.Errorf("packets_per_second series = %d, %v; want 4 (in, out for 2 nodes)", n, err)
	}
}

// TestGone: a node is gone once stale or stopped, and one never heard is
// gone only after the registry listened for the stale time; a fresh
// heartbeat brings a node back.
func TestGone(t *testing.T) {
	r, w, clk := newTest(t)
	if r.Gone("nobody") {
		t.Error("a registry that just started takes an unheard node for dead")
	}
	w.fn(beat("a", 1, 10))
	w.fn(beat("b", 1, 10))
	clk.add(4 * time.Second)
	w.fn(beat("b", 1, 14))
	if r.Gone("a") || r.Gone("b") {
		t.Error("a node heard 4 s ago is gone")
	}
	clk.add(time.Second)
	if !r.Gone("a") || r.Gone("b") {
		t.Errorf("after 5 s without a's heartbeat: a gone %v, b gone %v", r.Gone("a"), r.Gone("b"))
	}
	if !r.Gone("nobody") {
		t.Error("after listening 5 s, a node never heard is not gone")
	}
	w.fn(beat("a", 1, 1)) // restarted
	if r.Gone("a") {
		t.Error("a node whose heartbeat came back is gone")
	}
	w.fn(bus.NodeStatus{NodeID: "b", Type: bus.EventStopped})
	if !r.Gone("b") {
		t.Error("a stopped node is not gone")
	}
}
