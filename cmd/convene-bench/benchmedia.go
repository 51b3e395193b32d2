package main

import (
	"flag"
	"io"
	"strings"
	"time"

	"github.com/convene/convene/internal/bench/mediabench"
)

// benchMediaCmd measures the node's media services (composites,
// thumbnails, HLS viewers) beside plain ffmpeg and ffmpeg's HLS behind
// nginx, and writes <out>/<date>-media.md and .json.
func benchMediaCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("media", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/results", "directory for the report (.md, .json)")
	parts := fs.String("parts", "composites,thumbnails,hls", "what to measure: composites, thumbnails, hls")
	peers := fs.Bool("peers", true, "measure the classic pipeline beside the node (plain ffmpeg composites; ffmpeg's HLS muxer behind Debian's nginx)")
	quick := fs.Bool("quick", false, "fewer, shorter steps: composites 1,2; 8 thumbnails; viewers 100,1000; 4 s windows (about a minute and a half)")
	compSteps := fs.String("steps", "1,2,3,4,6,8,12,16", "composite counts, in order; a series stops at the first that misses the bar")
	thumbSteps := fs.String("thumbnail-steps", "8,32,96,192", "video tracks with a thumbnail grabber, in order")
	viewerSteps := fs.String("viewer-steps", "200,800,3200,6400", "HLS viewers, in order")
	warmup := fs.Duration("warmup", 3*time.Second, "warm-up of each step before its window")
	window := fs.Duration("window", 8*time.Second, "measuring window of each composite and viewer step")
	thumbWindow := fs.Duration("thumbnail-window", 9*time.Second, "measuring window of each thumbnail step (a multiple of the grabbers' 3 s)")
	budget := fs.Duration("budget", 6*time.Minute, "time for the whole run, shared by the parts")
	ffmpegBin := fs.String("ffmpeg", "ffmpeg", "the ffmpeg `binary` (the cameras' recording, the node's children and the peers)")
	nginxBin := fs.String("nginx", "nginx", "the nginx `binary` serving ffmpeg's HLS")
	nice := fs.Int("nice", -10, "niceness of the node, the peers and the load alike (negative needs root; 0 leaves it)")
	note := fs.String("note", "", "a note for the report (the machine's state, say)")
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	server := conveneFlag(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range map[string]string{"steps": "1,2", "thumbnail-steps": "8", "viewer-steps": "100,1000",
			"window": "4s", "thumbnail-window": "6s", "warmup": "2s", "budget": "80s"} {
			if !set[name] {
				fs.Set(name, v)
			}
		}
	}
	bin := conveneBin("media", *server, stderr)
	if bin == "" {
		return 1
	}
	steps, ok := intLists("media", map[string]string{"composites": *compSteps, "thumbnails": *thumbSteps, "viewers": *viewerSteps}, stderr)
	if !ok {
		return 2
	}
	h := holdBench("media", *wait, *out, stderr)
	if h == nil {
		return 1
	}
	defer h.release()
	res, err := mediabench.Run(h.Ctx, mediabench.Config{Convene: bin, FFmpeg: *ffmpegBin, Nginx: *nginxBin,
		Parts: strings.Split(*parts, ","), Peers: *peers, CompositeSteps: steps["composites"], ThumbnailSteps: steps["thumbnails"],
		ViewerSteps: steps["viewers"], Warmup: *warmup, Window: *window, ThumbnailWindow: *thumbWindow, Budget: *budget, Nice: *nice,
		Tmp: h.Tmp, Log: stdout, Notes: nonEmpty(*note)})
	return report("media", stdout, stderr, err, func() (string, error) { return mediabench.Write(*out, res) },
		func() string { return mediabench.Format(res) })
}
