package clusterbench

import (
	"math"
	"testing"
)

// TestFitFindsTheCostsThatMadeTheCPU: nodes whose CPU is made from known
// costs give those costs back, and the model predicts every node.
func TestFitFindsTheCostsThatMadeTheCPU(t *testing.T) {
	want := Costs{Delivered: 2e-6, Ingress: 5e-6, BridgeOut: 3e-6, BridgeIn: 4e-6}
	us := []NodeUse{
		{Delivered: 30000, Ingress: 1600},                               // one node
		{Delivered: 15000, Ingress: 800, BridgeOut: 800, BridgeIn: 800}, // two
		{Delivered: 15500, Ingress: 820, BridgeOut: 820, BridgeIn: 780},
		{Ingress: 1600, BridgeOut: 1600},                                 // hop: speakers' node
		{Delivered: 30000, BridgeIn: 1600},                               // hop: listeners' node
		{Delivered: 10000, Ingress: 530, BridgeOut: 530, BridgeIn: 1070}, // three
	}
	for i := range us {
		us[i].CPU = want.Predict(us[i])
	}
	got, err := Fit(us)
	if err != nil {
		t.Fatal(err)
	}
	gv, wv := got.vec(), want.vec()
	for i := range gv {
		if math.Abs(gv[i]-wv[i]) > 1e-9 {
			t.Fatalf("cost %d: got %g, want %g (all: %+v)", i, gv[i], wv[i], got)
		}
	}
}

// TestFitKeepsCostsNonNegative: data that would fit a negative cost gets
// zero there, and a rate never seen gets zero.
func TestFitKeepsCostsNonNegative(t *testing.T) {
	us := []NodeUse{
		{Delivered: 1000, Ingress: 100, CPU: 0.002},
		{Delivered: 2000, Ingress: 300, CPU: 0.0039},
		{Delivered: 3000, Ingress: 500, CPU: 0.0058},
	}
	got, err := Fit(us)
	if err != nil {
		t.Fatal(err)
	}
	if got.Ingress < 0 || got.Delivered <= 0 || got.BridgeIn != 0 || got.BridgeOut != 0 {
		t.Fatalf("got %+v", got)
	}
}

func TestFitNeedsEnoughNodes(t *testing.T) {
	if _, err := Fit([]NodeUse{{Delivered: 1, Ingress: 1, BridgeIn: 1, CPU: 1}}); err == nil {
		t.Fatal("three costs fitted from one node")
	}
}

// TestScenario: the seed's scenario in the model.
func TestScenario(t *testing.T) {
	c := Costs{Delivered: 2e-6, Ingress: 5e-6, BridgeOut: 3e-6, BridgeIn: 4e-6}
	s := Scenario{Sessions: 500, Members: 20, Institutions: 10, PPS: 50}
	if s.Users() != 10000 {
		t.Fatal(s.Users())
	}
	// One session: 5 + 19·2 + 9·(3+4) = 106 µs per packet (a copy to
	// each of nine institutions), 50 packets/s.
	if got := s.sessionCost(c); math.Abs(got-106e-6*50) > 1e-12 {
		t.Fatalf("session cost %g", got)
	}
	// 500 sessions: 2.65 cores; a budget of 0.5 cores needs 6 nodes, but
	// ten institutions need ten.
	if n := s.Nodes(c, 0.5); n != 10 {
		t.Fatalf("nodes %d", n)
	}
	s.Institutions = 2
	// Two institutions: (5+38+4+3) µs · 50 /s · 500 = 1.25 cores; at 0.1
	// cores a node, 13 nodes.
	if n := s.Nodes(c, 0.1); n != 13 {
		t.Fatalf("nodes %d", n)
	}
	// Scaling: (5+38)/(5+38+4+3) = 0.86 for two institutions.
	if got := s.Scaling(c, 2); math.Abs(got-43.0/50) > 1e-9 {
		t.Fatalf("scaling %g", got)
	}
	if got := s.Scaling(c, 1); got != 1 {
		t.Fatalf("one node scales %g", got)
	}
}
