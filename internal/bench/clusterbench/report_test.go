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
		Scaling: []ScalingRow{{Nodes: 2, Model: 0.95, Measured: 0.8, Placed: 0.93}, {Nodes: 3, Model: 0.7, Measured: 0.6, Placed: 0.85}}}
	res.BridgedRatio = bridgedRatio(res.Points)
	if math.Abs(res.BridgedRatio-1.5) > 1e-9 {
		t.Fatalf("bridged ratio %g, want 1.5", res.BridgedRatio)
	}
	md := Format(res)
	for _, want := range []string{"| 1 node | n1 |", "| hop | n2 |", "257.0 / 300.0", "1.50 × | **no**", "0.95 model, 0.80 measured | **no**", "0.93 measured | yes", "0.85 measured | **no**", "| hop | 0.010 | 0.020 | 0.000 | 300.0 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
