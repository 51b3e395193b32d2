package clusterbench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/convene/convene/internal/bench/loadgen"
	"github.com/convene/convene/internal/bench/results"
)

// Targets of issue 16.
const (
	// TargetBridged bounds a node's CPU per delivered packet when every
	// packet it delivers came over a node hop, against one whose packets
	// came from its own endpoints.
	TargetBridged = 1.2
	// TargetScaling is what N nodes must carry against N times one node.
	TargetScaling = 0.9
	// Budget is the CPU a node may use in the predictions: 80 % of one
	// core, the rest headroom for bursts (video, joins).
	Budget = 0.8
)

// Config of a run.
type Config struct {
	Convene  string // the convene binary
	Tmp      string
	Sessions int // R
	Members  int // M
	Warmup   time.Duration
	Window   time.Duration
	Log      func(format string, a ...any)
	Notes    []string
	// Profile is a path prefix for the nodes' CPU profiles ("": none).
	Profile string
	// Batch is the nodes' nats.media_batch: how long a bridged packet
	// may wait for others to the same node.
	Batch time.Duration
}

// Prediction is the model's answer for one scenario.
type Prediction struct {
	Scenario Scenario
	Nodes    int
}

// ScalingRow is N nodes against N × one node, in the model and as
// measured: each session spread over N institutions (a node each), and
// each session placed on one of the N nodes.
type ScalingRow struct {
	Nodes    int
	Model    float64
	Measured float64 // 0 when not measured
	// Placed is the placed layout's measure (0 when not measured); the
	// model gives it 1, as no packet crosses.
	Placed float64
	// Weak is the placed layout with N times the load (N×R sessions, so
	// each node has one node's R): N nodes given N times one node's load,
	// each as busy as the one node was. 0 when not measured.
	Weak float64
}

// Check is the model against one measured node.
type Check struct {
	Layout    string
	Node      string
	Measured  float64 // cores
	Predicted float64
}

// Result of a run.
type Result struct {
	Date     time.Time
	Version  string
	NATS     string
	CPUs     int
	Sessions int
	Members  int
	Warmup   time.Duration
	Window   time.Duration
	Batch    time.Duration
	Idle     []float64
	Points   []Point
	Costs    Costs
	FitErr   string
	Checks   []Check
	// BridgedRatio is the listeners' node's CPU per delivered packet in
	// the hop layout over the single node's; 0 when not measured.
	BridgedRatio float64
	Scaling      []ScalingRow
	Predictions  []Prediction
	Notes        []string
}

// Layouts are the measurements of a run: the sessions on one node, spread
// over two and over three, the hop layouts (speakers on one node,
// listeners on one other, or on two others), and the sessions placed on
// two and on three nodes: the same R sessions, and N×R of them (each node
// as busy as the one node).
func Layouts(r, m int) []Layout {
	return []Layout{
		{Name: "1 node", Sessions: r, Members: m, Nodes: 1},
		{Name: "2 nodes", Sessions: r, Members: m, Nodes: 2},
		{Name: "3 nodes", Sessions: r, Members: m, Nodes: 3},
		{Name: "hop", Sessions: r, Members: m, Nodes: 2, Hop: true},
		{Name: "fan", Sessions: r, Members: m, Nodes: 3, Hop: true},
		{Name: "2 placed", Sessions: r, Members: m, Nodes: 2, Placed: true},
		{Name: "3 placed", Sessions: r, Members: m, Nodes: 3, Placed: true},
		{Name: "2 placed x2", Sessions: 2 * r, Members: m, Nodes: 2, Placed: true},
		{Name: "3 placed x3", Sessions: 3 * r, Members: m, Nodes: 3, Placed: true},
	}
}

// Run starts a three-node cluster, measures the layouts and fits the
// model. An interrupted run returns what it measured with ctx's error.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Date: time.Now(), CPUs: runtime.NumCPU(), Sessions: cfg.Sessions, Members: cfg.Members,
		Warmup: cfg.Warmup, Window: cfg.Window, Batch: cfg.Batch, Notes: cfg.Notes}
	logf := cfg.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	c, err := Start(cfg.Convene, cfg.Tmp, 3, cfg.Batch)
	if err != nil {
		return res, err
	}
	defer c.Stop()
	res.Version, res.NATS = c.Nodes[0].Version, c.NATS
	time.Sleep(2 * time.Second) // the registry's first heartbeats
	res.Idle = IdleCPU(ctx, c, 5*time.Second)
	logf("idle CPU per node: %.3f %.3f %.3f cores", res.Idle[0], res.Idle[1], res.Idle[2])
	var all []NodeUse
	for _, l := range Layouts(cfg.Sessions, cfg.Members) {
		p, err := Measure(ctx, c, l, res.Idle, Options{Warmup: cfg.Warmup, Window: cfg.Window, Profile: cfg.Profile})
		if err != nil {
			return res, fmt.Errorf("%s: %w", l.Name, err)
		}
		res.Points = append(res.Points, p)
		all = append(all, p.Nodes...)
		logf("%s: local %d listeners avg %.2f ms, bridged %d avg %.2f ms; CPU %s", l.Name, p.Local.Count, p.Local.AvgMs,
			p.Bridged.Count, p.Bridged.AvgMs, cpus(p.Nodes))
	}
	res.Costs, err = Fit(all)
	if err != nil {
		res.FitErr = err.Error()
	}
	for _, p := range res.Points {
		for _, u := range p.Nodes {
			res.Checks = append(res.Checks, Check{Layout: p.Layout.Name, Node: u.Node, Measured: u.CPU, Predicted: res.Costs.Predict(u)})
		}
	}
	res.BridgedRatio = bridgedRatio(res.Points)
	pps := float64(time.Second / loadgen.AudioInterval)
	base := Scenario{Sessions: cfg.Sessions, Members: cfg.Members, Institutions: 1, PPS: pps}
	one := perDelivered(find(res.Points, "1 node"))
	for _, n := range []int{2, 3, 10} {
		row := ScalingRow{Nodes: n, Model: base.Scaling(res.Costs, n)}
		if n <= 3 {
			if pn := perDelivered(find(res.Points, fmt.Sprintf("%d nodes", n))); pn > 0 && one > 0 {
				row.Measured = one / pn
			}
			if pn := perDelivered(find(res.Points, fmt.Sprintf("%d placed", n))); pn > 0 && one > 0 {
				row.Placed = one / pn
			}
			if pn := perDelivered(find(res.Points, fmt.Sprintf("%d placed x%d", n, n))); pn > 0 && one > 0 {
				row.Weak = one / pn
			}
		}
		res.Scaling = append(res.Scaling, row)
	}
	for _, s := range []Scenario{
		{Sessions: 500, Members: 20, Institutions: 10, PPS: pps},
		{Sessions: 5000, Members: 20, Institutions: 10, PPS: pps},
		{Sessions: 2500, Members: 40, Institutions: 25, PPS: pps},
	} {
		res.Predictions = append(res.Predictions, Prediction{Scenario: s, Nodes: s.Nodes(res.Costs, Budget)})
	}
	return res, ctx.Err()
}

func cpus(us []NodeUse) string {
	s := ""
	for _, u := range us {
		s += fmt.Sprintf(" %s=%.3f", u.Node, u.CPU)
	}
	return s
}

func find(ps []Point, name string) *Point {
	for i := range ps {
		if ps[i].Layout.Name == name {
			return &ps[i]
		}
	}
	return nil
}

// perDelivered is a point's CPU over all its nodes per delivered packet.
func perDelivered(p *Point) float64 {
	if p == nil {
		return 0
	}
	var cpu, d float64
	for _, u := range p.Nodes {
		cpu += u.CPU
		d += u.Delivered
	}
	if d == 0 {
		return 0
	}
	return cpu / d
}

// bridgedRatio is the hop layout's listeners' node CPU per delivered
// packet over the single node's.
func bridgedRatio(ps []Point) float64 {
	one, hop := find(ps, "1 node"), find(ps, "hop")
	if one == nil || hop == nil || len(hop.Nodes) < 2 || len(one.Nodes) < 1 {
		return 0
	}
	a, b := one.Nodes[0], hop.Nodes[1]
	if a.Delivered == 0 || b.Delivered == 0 || a.CPU == 0 {
		return 0
	}
	return (b.CPU / b.Delivered) / (a.CPU / a.Delivered)
}

// Write saves <dir>/<date>-cluster.md and .json and returns the .md path.
func Write(dir string, res Result) (string, error) {
	return results.Write(dir, res.Date, "cluster", res, Format(res))
}
