package brokerbench

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// latencyFloor is where latencies are drawn on the log axis when they are
// smaller (or zero).
const latencyFloor = 0.01

// writePlots draws, for each scenario with points, the average latency of
// the reported listeners against the participants, one line per system
// (and kind, where the scenario has two) beside the seed's, like the seed's
// Figures 3 and 4. It returns the files written and what went wrong.
func writePlots(dir, stamp string, r Report) (pngs, notes []string) {
	for _, sc := range allScenarios {
		path := filepath.Join(dir, stamp+"-"+sc+".png")
		ok, err := plotScenario(path, r, sc)
		switch {
		case err != nil:
			notes = append(notes, fmt.Sprintf("plot of %s not drawn: %v", sc, err))
		case ok:
			pngs = append(pngs, path)
		}
	}
	return pngs, notes
}

type series struct {
	name, system string
	video        bool // the second kind of a two-kind scenario
	xys          plotter.XYs
}

// scenarioSeries returns our lines of a scenario: per system, per kind, the
// points that measured anything, in the seed's unit of users.
func scenarioSeries(r Report, sc string) []series {
	kinds := scenarioKinds(sc)
	var out []series
	for _, sys := range systemsOf(r) {
		for _, kt := range kinds {
			s := series{name: sys, system: sys}
			if len(kinds) > 1 {
				s.name += " " + kt.kind
				s.video = kt.kind == "video"
			}
			for _, p := range r.Points {
				if p.System != sys || p.Scenario != sc || p.Error != "" {
					continue
				}
				k, ok := kindOf(p, kt.kind)
				if !ok || math.IsNaN(k.AvgLatencyMs) || math.IsInf(k.AvgLatencyMs, 0) {
					continue
				}
				s.xys = append(s.xys, plotter.XY{X: float64(seedUsers(p)), Y: max(k.AvgLatencyMs, latencyFloor)})
			}
			if len(s.xys) == 0 {
				continue
			}
			slices.SortFunc(s.xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
			out = append(out, s)
		}
	}
	return out
}

// plotScenario writes the scenario's PNG; false without error when the
// run has no points to draw there.
func plotScenario(path string, r Report, sc string) (ok bool, err error) {
	ours := scenarioSeries(r, sc)
	if len(ours) == 0 {
		return false, nil
	}
	defer func() {
		if v := recover(); v != nil {
			ok, err = false, fmt.Errorf("plotting: %v", v)
		}
	}()
	p := plot.New()
	p.Title.Text = sc + ": average latency against participants"
	switch sc {
	case ScenarioCombined:
		p.X.Label.Text = "users in each of the two meetings (log scale)"
	case ScenarioMultiVideo, ScenarioMultiCombined:
		p.X.Label.Text = "users in all meetings of 20 (log scale)"
	default:
		p.X.Label.Text = "users in the meeting (log scale)"
	}
	p.Y.Label.Text = "average latency, ms (log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = logTicks{}, logTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())

	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := float64(MaxAvgLatency.Milliseconds()), float64(MaxAvgLatency.Milliseconds())
	extend := func(xys plotter.XYs) {
		for _, v := range xys {
			xmin, xmax = min(xmin, v.X), max(xmax, v.X)
			ymin, ymax = min(ymin, v.Y), max(ymax, v.Y)
		}
	}
	// A system keeps its colour; in two-kind scenarios video is dashed
	// with square marks.
	systems := systemsOf(r)
	for _, s := range ours {
		line, points, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return false, err
		}
		i := slices.Index(systems, s.system)
		c := plotutil.DarkColors[max(i, 0)%len(plotutil.DarkColors)]
		line.Color, points.Color = c, c
		line.Width = vg.Points(1.5)
		points.Shape = draw.CircleGlyph{}
		if s.video {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			points.Shape = draw.SquareGlyph{}
		}
		p.Add(line, points)
		p.Legend.Add(s.name, line, points)
		extend(s.xys)
	}
	for j, t := range seedTablesFor(sc) {
		xs, ys := t.LatencyCurve()
		xys := make(plotter.XYs, len(xs))
		for i := range xs {
			xys[i] = plotter.XY{X: xs[i], Y: max(ys[i], latencyFloor)}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return false, err
		}
		c := color.RGBA{R: 110, G: 110, B: 110, A: 255}
		line.Color, points.Color = c, c
		line.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		line.Width = vg.Points(1.5)
		points.Shape = draw.CrossGlyph{}
		if j > 0 {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}
			points.Shape = draw.PlusGlyph{}
		}
		p.Add(line, points)
		p.Legend.Add(fmt.Sprintf("seed Table %d (%s, NaradaBrokering 2005)", t.Number, t.Kind), line, points)
		extend(xys)
	}
	// The quality bar.
	xmin, xmax = math.Pow(10, math.Floor(math.Log10(xmin))), math.Pow(10, math.Ceil(math.Log10(xmax)))
	barY := float64(MaxAvgLatency.Milliseconds())
	bar, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: barY}, {X: xmax, Y: barY}})
	if err != nil {
		return false, err
	}
	bar.Color = color.RGBA{R: 200, G: 30, B: 30, A: 255}
	bar.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(bar)
	p.Legend.Add(fmt.Sprintf("pass bar: average under %d ms", MaxAvgLatency.Milliseconds()), bar)

	p.X.Min, p.X.Max = xmin, xmax
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(ymin)))
	// Room above the data for the legend (drawn inside, at the top left):
	// each entry takes about 4 % of the height.
	decades := math.Ceil(math.Log10(ymax)) - math.Log10(p.Y.Min)
	room := min(0.04*float64(len(ours)+len(seedTablesFor(sc))+1)+0.03, 0.6)
	p.Y.Max = math.Pow(10, math.Log10(p.Y.Min)+math.Ceil(decades/(1-room)))

	return true, savePNG(p, path)
}

// savePNG draws p on a 9 × 5.5 inch canvas at 110 dpi into path.
func savePNG(p *plot.Plot, path string) error {
	c := vgimg.NewWith(vgimg.UseWH(9*vg.Inch, 5.5*vg.Inch), vgimg.UseDPI(110))
	p.Draw(draw.New(c))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// logTicks labels 1, 2 and 5 of each decade of a log axis.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		dec := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := float64(m) * dec
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
