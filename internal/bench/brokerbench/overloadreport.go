package brokerbench

import (
	"github.com/convene/convene/internal/bench/convene"

	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WriteOverloadReport writes <stamp>-overload.md, .json and a PNG per
// scenario (average latency of the admitted against the offered load).
func WriteOverloadReport(dir string, r OverloadReport) (mdPath, jsonPath string, pngs []string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", nil, err
	}
	stamp := r.Started.UTC().Format(stampFormat) + "-overload"
	if jsonPath, err = writeJSON(dir, stamp, r); err != nil {
		return "", "", nil, err
	}
	var notes []string
	for _, sc := range OverloadNames() {
		path := filepath.Join(dir, stamp+"-"+strings.TrimPrefix(sc, "overload-")+".png")
		ok, err := plotOverload(path, r, sc)
		switch {
		case err != nil:
			notes = append(notes, fmt.Sprintf("plot of %s not drawn: %v", sc, err))
		case ok:
			pngs = append(pngs, path)
		}
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Overload: %s\n\n", r.Started.UTC().Format(time.RFC3339))
	fmt.Fprintf(&md, "Host: %s. Quick: %v. Convene's capacity: %.0f packets/s handled (sent, and taken from endpoints), as the node said at start-up; offered up to 2× that, "+
		"with joins continuing (10 %% more offered during the last window). Late counts lost packets too; "+
		"a window passes with 0 %% late and an average under %d ms for the listeners admitted before it.\n\n",
		r.Host, r.Quick, r.CapacityPPS, MaxAvgLatency.Milliseconds())
	md.WriteString("\"node's own delay\" is Convene's convene_media_forward_delay_seconds over the window (a batch of sends, from its oldest packet's queueing " +
		"to its last datagram handed to the kernel), as the upper bound of its bucket; \"node's reader\" the same of the wait in its socket's receive queue before its reader took a datagram " +
		"(convene_media_receive_delay_seconds): latency beyond both was spent outside the node (the kernel, the load's process); " +
		"\"node's waits > 100 ms\" counts the sends and reads of either that waited past the late bar in the node alone (none: a late packet was made late elsewhere). " +
		"\"dropped\" is where the window's packets were dropped, as counted: by the node itself (convene_media_dropped_packets_total; – for a system that does not say), " +
		"by the kernel at the server's sockets and at the load's (/proc/net/udp; full receive buffers: a process that did not read in time). " +
		"On one machine the load's drops are the load's limit, not the server's; the window fails for them all the same. " +
		"\"machine busy\" is every process's and the kernel's CPU over the window, of all the machine's CPUs. " +
		"\"node admits up to\" is what the node's governor said at the window's end (/api/v1/node): the packets/s handled (sent, and taken from endpoints) it admits up to, " +
		"and what set that: its CPU per packet (cpu), its queues past 20 ms (queueing), or a machine at least 80 % busy, when it admits nothing more (machine).\n\n")
	if r.InStep {
		md.WriteString("Every meeting's speaker started at the same instant (-in-step): all meetings send each frame together.\n\n")
	} else {
		md.WriteString("The meetings' speakers start spread over one frame interval (30 ms of audio, 66.7 ms of video), " +
			"as meetings people start at their own times are; -in-step starts them together.\n\n")
	}
	for _, t := range overloadTables(r) {
		t.markdown(&md)
	}
	for _, p := range pngs {
		fmt.Fprintf(&md, "![%s](%s)\n\n", filepath.Base(p), filepath.Base(p))
	}
	for _, n := range append(r.Notes, notes...) {
		fmt.Fprintf(&md, "- %s\n", n)
	}
	mdPath = filepath.Join(dir, stamp+".md")
	return mdPath, jsonPath, pngs, os.WriteFile(mdPath, []byte(md.String()), 0o644)
}

// FormatOverload returns the overload tables as aligned text.
func FormatOverload(r OverloadReport) string {
	var b strings.Builder
	for _, t := range overloadTables(r) {
		t.text(&b)
	}
	return b.String()
}

// limitCell is the node's admission limit and what set it, at the
// window's end; – for a system without admission.
func limitCell(s OverloadStep) string {
	if s.NodeLimit == "" {
		return "–"
	}
	return fmt.Sprintf("%.0f, %s", s.NodeAdmitPPS, s.NodeLimit)
}

func overloadTables(r OverloadReport) []table {
	var out []table
	for _, run := range r.Runs {
		t := table{title: fmt.Sprintf("%s on %s: %d listeners offered", run.Scenario, run.System, run.Listeners),
			header: []string{"offered (× capacity)", "offered", "admitted", "refused", "failed", "measured", "late %", "loss %", "avg latency ms", "delivered pkt/s", "node's own delay p99 ms", "node's reader p99 ms", "node's waits > 100 ms", "dropped: node / its sockets / load's sockets", "machine busy", "node admits up to (pkt/s handled), limited by", "pass"}}
		for _, s := range run.Steps {
			t.rows = append(t.rows, []string{fmt.Sprintf("%.2f", s.OfferedX), fmt.Sprint(s.Offered), fmt.Sprint(s.Admitted),
				fmt.Sprint(s.Refused), fmt.Sprint(s.Failed), fmt.Sprint(s.Measured), fmt.Sprintf("%.3f", s.LatePct),
				fmt.Sprintf("%.3f", s.LossPct), fmt.Sprintf("%.1f", s.AvgLatencyMs), fmt.Sprintf("%.0f", s.DeliveredPPS),
				convene.BoundMs(s.NodeDelayP99Ms), convene.BoundMs(s.NodeReadP99Ms), overLateCell(s), dropsCell(s), fmt.Sprintf("%.0f%%", 100*s.MachineBusy), limitCell(s), passWord(s.Pass)})
		}
		t.foot = fmt.Sprintf("In all: %d admitted, %d refused (answered in %.1f ms on average, %.1f ms at most), %d failed.",
			run.Admitted, run.Refused, run.RefusalAvgMs, run.RefusalMaxMs, run.Failed)
		if run.Error != "" {
			t.foot += " ERROR: " + run.Error
		}
		out = append(out, t)
	}
	return out
}

// overLateCell is the node's own waits past the late bar; – for a system
// that does not say.
func overLateCell(s OverloadStep) string {
	if s.NodeDelayP99Ms == 0 && s.NodeReadP99Ms == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", s.NodeOverLate)
}

// dropsCell is where a window's lost packets were dropped: by the node
// (– when it does not say), at its sockets, at the load's.
func dropsCell(s OverloadStep) string {
	own := "–"
	if s.DropsServer >= 0 {
		own = fmt.Sprint(s.DropsServer)
	}
	return fmt.Sprintf("%s / %d / %d", own, s.DropsServerKernel, s.DropsLoadKernel)
}

func passWord(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

// plotOverload draws the admitted listeners' average latency against the
// offered load, a line per system; false without error when there is
// nothing to draw.
func plotOverload(path string, r OverloadReport, sc string) (ok bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			ok, err = false, fmt.Errorf("plotting: %v", v)
		}
	}()
	p := plot.New()
	p.Title.Text = sc + ": latency of the admitted against the offered load"
	p.X.Label.Text = "offered load, × the node's capacity"
	p.Y.Label.Text = "average latency, ms (log scale)"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	ymax := float64(MaxAvgLatency.Milliseconds())
	var systems []string
	for _, run := range r.Runs {
		if run.Scenario != sc || len(run.Steps) == 0 {
			continue
		}
		var xys plotter.XYs
		for _, s := range run.Steps {
			if s.Measured > 0 && !math.IsNaN(s.AvgLatencyMs) {
				xys = append(xys, plotter.XY{X: s.OfferedX, Y: max(s.AvgLatencyMs, latencyFloor)})
				ymax = max(ymax, s.AvgLatencyMs)
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return false, err
		}
		if !slices.Contains(systems, run.System) {
			systems = append(systems, run.System)
		}
		c := plotutil.DarkColors[slices.Index(systems, run.System)%len(plotutil.DarkColors)]
		line.Color, points.Color, line.Width, points.Shape = c, c, vg.Points(1.5), draw.CircleGlyph{}
		p.Add(line, points)
		p.Legend.Add(run.System, line, points)
	}
	if len(systems) == 0 {
		return false, nil
	}
	bar, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(MaxAvgLatency.Milliseconds())}, {X: 2.2, Y: float64(MaxAvgLatency.Milliseconds())}})
	if err != nil {
		return false, err
	}
	bar.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(bar)
	p.Legend.Add(fmt.Sprintf("pass bar: average under %d ms", MaxAvgLatency.Milliseconds()), bar)
	p.X.Min, p.X.Max = 0, 2.2
	p.Y.Min, p.Y.Max = 0.1, math.Pow(10, math.Ceil(math.Log10(ymax))+1)
	return true, savePNG(p, path)
}
