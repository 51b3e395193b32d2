package mediabench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/bench/results"
)

func sampleResult() Result {
	res := Result{Run: results.NewRun(3*time.Second, 8*time.Second, -10), CameraKbps: 311, LoopbackMBps: 1500}
	res.CPUs = 2
	res.Composites = []CompositeSeries{
		{System: "convene", Version: "convene test", MaxOK: 3, CPUPer: 0.21, Ended: EndedMiss, Points: []CompositePoint{
			{Composites: 3, Frames: Frames{Streams: 3, Expected: 360, Received: 360}, Usage: Usage{CPU: 0.63}, CPUPer: 0.21, OK: true},
			{Composites: 4, Frames: Frames{Streams: 4, Expected: 480, Received: 470, Late: 40, LateMax: 480}, Usage: Usage{CPU: 0.9}, CPUPer: 0.225},
			{Composites: 4, Retry: true, Frames: Frames{Streams: 4, Expected: 480, Received: 471, Late: 30}, CPUPer: 0.22},
		}},
		{System: "ffmpeg", Version: "ffmpeg 5.1.9", MaxOK: 2, CPUPer: 0.2, Ended: EndedMiss, Points: []CompositePoint{{Composites: 2, OK: true, CPUPer: 0.2}}},
	}
	res.Thumbnails = []ThumbSeries{{System: "convene", Version: "convene test", MaxOK: 16, PerSecond: 5.3, CPUPerImage: 20,
		Points: []ThumbPoint{{Tracks: 16, Images: 64, Expected: 64, PerSecond: 5.3, CPUPerImage: 20, CPUPerGrabber: 0.007, OK: true}}}}
	res.HLS = []ViewerSeries{
		{System: "convene", Version: "convene test", MaxOK: 800, MBps: 90, Ended: EndedMiss, ProducerCPU: 0.06, ServerCPU: "the node's process",
			Points: []ViewerPoint{{Viewers: 800, Segments: 3200, MBps: 90, P50: 2.5, P99: 40, OK: true}, {Viewers: 1600, Late: 3, LastErr: "x"}}},
		{System: "nginx", Version: "nginx/1.22.1", MaxOK: 1600, MBps: 180, ProducerCPU: 0.05, Ended: EndedMiss,
			Points: []ViewerPoint{{Viewers: 1600, Segments: 6400, MBps: 180, OK: true}}},
	}
	return res
}

// TestFormat: the report has the seed's Table 2 beside ours, a row per
// step (retries marked), the answers and the ratios.
func TestFormat(t *testing.T) {
	md := Format(sampleResult())
	for _, want := range []string{
		"## Beside the seed's Table 2",
		"| Video mixing (4-way, H.261, 150 kb/s) | 4 | 94% | 23.5% | 3 2×2 360p15 composites | 21.0% of a core | 2 2×2 360p15 composites | 20.0% of a core |",
		"| Image grabber (H.261 → JPEG) | 50 | 70% | 1.4% | 16 grabbers (5.3 JPEG/s) | 0.7% of a core | – | – |",
		"| RealStreaming producer (23 fps) | 4 | 90% | 22.5% | 800 viewers of one producer | producer 6.0% of a core | 1600 viewers of one producer | producer 5.0% of a core |",
		"| convene | 4 (again) |",
		"- convene (convene test): **3 composites** at full rate, 0.210 cores each; the machine's 2 CPUs at that cost would hold 10",
		"- Convene / plain ffmpeg: 1.50× the composites, 1.05× the CPU per composite at their most",
		"- convene (convene test): **16 grabbers**, 5.3 JPEG/s at full rate, 20 ms of CPU per JPEG",
		"| convene | 1600 | 0 | 0.00 |",
		"- nginx (nginx/1.22.1): **1600 viewers** at full rate, 180.00 MB/s (12.00% of the loopback limit)",
		"- Convene / nginx viewers: 0.50×",
		"niceness -10",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
	// No ratio of counts when a series ran out of time or steps.
	res := sampleResult()
	res.HLS[1].Ended = EndedBudget
	if md := Format(res); strings.Contains(md, "- Convene / nginx viewers: 0.50×") || !strings.Contains(md, "no ratio") {
		t.Errorf("a ratio of a series cut by the budget")
	}
	// A part not measured is left out, and a system that passed nothing
	// says so in the seed's table.
	res = sampleResult()
	res.Thumbnails, res.HLS = nil, nil
	res.Composites[1].MaxOK = 0
	res.Composites[1].Points[0].OK = false
	md = Format(res)
	if strings.Contains(md, "## Thumbnails") || strings.Contains(md, "## HLS") || !strings.Contains(md, "| 21.0% of a core | 0 | – |") ||
		!strings.Contains(md, "**0 composites** at full rate (one cost 0.200 cores, late; the machine's 2 CPUs at that cost would hold 10)") {
		t.Errorf("a partial run:\n%s", md)
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	res := sampleResult()
	path, err := Write(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Ext(path) != ".md" || !strings.HasSuffix(path, "-media.md") {
		t.Errorf("report path %s", path)
	}
	b, err := os.ReadFile(strings.TrimSuffix(path, ".md") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || back.HLS[1].MaxOK != 1600 || back.Composites[0].Points[1].Frames.Late != 40 {
		t.Errorf("the JSON read back: %v %+v", err, back)
	}
}
