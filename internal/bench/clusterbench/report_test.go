package clusterbench

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestFormatSaysWhetherTargetsPass: the report renders every layout and
// marks a missed target.
func TestFormatSaysWhetherTargetsPass(t *testing.T) {
	res := Result{Date: time.Unix(0, 0), Sessions: 2, Members: 3, Idle: []float64{0, 0, 0},
		Points: []Point{
			{Layout: Layout{Name: "1 node"}, Nodes: []NodeUse{{Node: "n1", CPU: 0.1, Delivered: 1000, Ingress: 100}}, Local: Listeners{Count: 4, AvgMs: 0.5}},
			{Layout: Layout{Name: "hop"}, Nodes: []NodeUse{{Node: "n1", CPU: 0.02, Ingress: 100, BridgeOut: 100, EnvelopeBytes: 257, WireBytes: 300},
				{Node: "n2", CPU: 0.15, Delivered: 1000, BridgeIn: 100}}, Bridged: Listeners{Count: 4, AvgMs: 0.9}, NATS: []float64{0.01, 0.02, 0}},
		},
		Scaling: []ScalingRow{{Nodes: 2, Model: 0.95, Measured: 0.8, Placed: 0.93, Weak: 0.97}, {Nodes: 3, Model: 0.7, Measured: 0.6, Placed: 0.85, Weak: 0.8}}}
	res.BridgedRatio = bridgedRatio(res.Points)
	if math.Abs(res.BridgedRatio-1.5) > 1e-9 {
		t.Fatalf("bridged ratio %g, want 1.5", res.BridgedRatio)
	}
	md := Format(res)
	for _, want := range []string{"| 1 node | n1 |", "| hop | n2 |", "257.0 / 300.0", "1.50 × | **no**",
		"2 nodes carry ≥ 0.9 × 2 × one node's load: given 2 × its load", "| 0.97 measured | yes |", "| 0.80 measured | **no** |",
		// M = 3: the seed's streams 3/(3+2) and 3/(3+4)
		"| 2 | 0.93 | 0.95 | 0.80 | 0.60 |", "| 3 | 0.85 | 0.70 | 0.60 | 0.43 |",
		"| hop | 0.010 | 0.020 | 0.000 | 300.0 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
