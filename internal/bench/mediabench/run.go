package mediabench

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/proc"
	"github.com/convene/convene/internal/bench/results"
)

// Config is one run.
type Config struct {
	Convene string // the server binary
	FFmpeg  string // Debian's ffmpeg: the cameras' recording and the peers
	Nginx   string // Debian's nginx: the HLS peer's web server
	// Parts are the measurements to make: composites, thumbnails, hls.
	Parts []string
	// Peers says whether to measure the classic pipeline beside the node.
	Peers bool
	// Steps are the counts each part grows through, in order: composites,
	// video tracks with a thumbnail grabber, HLS viewers.
	CompositeSteps, ThumbnailSteps, ViewerSteps []int
	Warmup, Window                              time.Duration
	// ThumbnailWindow is the thumbnails' window: a multiple of their 3 s.
	ThumbnailWindow time.Duration
	// Budget is the time for the whole run; each part gets its share.
	Budget time.Duration
	// Nice is the niceness of the node, the peers and this process (the
	// load) alike (proc.Nice; negative needs root; 0 leaves it).
	Nice  int
	Tmp   string
	Log   io.Writer
	Notes []string
}

// Result is a whole run.
type Result struct {
	results.Run
	// CameraKbps is the replayed camera's bitrate.
	CameraKbps float64 `json:"camera_kbps"`
	// LoopbackMBps is the machine's loopback TCP limit (LoopbackLimit).
	LoopbackMBps float64           `json:"loopback_mb_per_s"`
	Composites   []CompositeSeries `json:"composites,omitempty"`
	Thumbnails   []ThumbSeries     `json:"thumbnails,omitempty"`
	HLS          []ViewerSeries    `json:"hls,omitempty"`
	Notes        []string          `json:"notes,omitempty"`
}

// serveArgs lift the node's admission limits (composite.max and .cores,
// streaming.thumbnails_max and .hls_max, the capacity governor's
// packets/s), so that frames on time decide, as for the peers, which have
// no such limits.
var serveArgs = []string{"-composite-max", "1000", "-composite-cores", "64", "-streaming-thumbnails-max", "1000",
	"-streaming-hls-max", "10", "-capacity-pps", "10000000"}

// Run measures every part.
func Run(ctx context.Context, cfg Config) (Result, error) {
	res := Result{Run: results.NewRun(cfg.Warmup, cfg.Window, cfg.Nice)}
	if cfg.Nice != 0 {
		// The load (cameras, receivers, viewers) too: a stalled camera
		// would show as a late composite.
		if err := proc.NiceSelf(cfg.Nice); err != nil {
			return res, err
		}
	}
	for _, b := range []*string{&cfg.FFmpeg, &cfg.Nginx} {
		if p, err := exec.LookPath(*b); err == nil {
			*b = p
		}
	}
	if _, err := exec.LookPath(cfg.FFmpeg); err != nil {
		return res, fmt.Errorf("ffmpeg is needed (scripts/install-deps.sh bench): %w", err)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("`convene serve` ran with `%s`: the admission limits lifted, so that frames and deadlines decide, as for the peers, which have none", strings.Join(serveArgs, " ")))
	res.Notes = append(res.Notes, cfg.Notes...)
	rec, err := RecordCamera(ctx, cfg.FFmpeg)
	if err != nil {
		return res, err
	}
	res.CameraKbps = rec.Bitrate() / 1000
	fmt.Fprintf(cfg.Log, "camera: %d frames of VP8 %dx%d at %d fps, %.0f kb/s\n", loopFrames, CameraWidth, CameraHeight, CameraFPS, res.CameraKbps)
	total := 0
	for _, part := range cfg.Parts {
		total += partWeight[part]
	}
	start := time.Now()
	spent := 0
	for _, part := range cfg.Parts {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		// Each part ends at its share of the budget from the start, so
		// one that finishes early leaves its time to the next.
		spent += partWeight[part]
		end := start.Add(cfg.Budget * time.Duration(spent) / time.Duration(max(1, total)))
		switch part {
		case "composites":
			res.Composites = runComposites(ctx, cfg, rec, end)
		case "thumbnails":
			res.Thumbnails = runThumbnails(ctx, cfg, rec, end)
		case "hls":
			res.LoopbackMBps = LoopbackLimit(time.Second)
			fmt.Fprintf(cfg.Log, "loopback limit: %.0f MB/s\n", res.LoopbackMBps)
			res.HLS = runHLS(ctx, cfg, rec, res.LoopbackMBps, end)
		default:
			return res, fmt.Errorf("unknown part %q (composites, thumbnails, hls)", part)
		}
	}
	return res, ctx.Err()
}

// Why a series ended: only a series that ended at a miss (or at the
// machine's limit) found its system's most; a ratio of two is printed only
// then.
const (
	EndedMiss   = "a miss"
	EndedLimit  = "the loopback limit"
	EndedBudget = "the time budget"
	EndedSteps  = "its last step, all passed"
	EndedError  = "an error"
)

// found says whether a series that ended so found its system's most.
func found(ended string) bool { return ended == EndedMiss || ended == EndedLimit }

// partWeight is each part's share of the budget: the composites and the
// viewers have two series each (the node and its peer), the thumbnails
// one; the viewers' part also starts both streams and measures the
// loopback and the producers first (about 11 s).
var partWeight = map[string]int{"composites": 2, "thumbnails": 1, "hls": 3}

// startNode starts the node a part measures.
func startNode(cfg Config) (*convene.Node, error) {
	return convene.Start(convene.Options{Bin: cfg.Convene, Tmp: cfg.Tmp, Nice: cfg.Nice, Args: append(append([]string(nil), serveArgs...),
		"-streaming-ffmpeg", cfg.FFmpeg, "-streaming-hls-segment", hlsSegment+"s")})
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// timeFor says whether a step of warm-up and window (and slack for its
// setup) still fits before end.
func timeFor(cfg Config, end time.Time, slack time.Duration) bool {
	return time.Now().Add(cfg.Warmup + cfg.Window + slack).Before(end)
}
