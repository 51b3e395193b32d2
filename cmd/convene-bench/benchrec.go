package main

import (
	"flag"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/convene/convene/internal/bench/recbench"
)

// benchRecCmd measures recording beside Janus VideoRoom's recorder and
// writes <out>/<date>-recorder.md and .json.
func benchRecCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("recorder", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/results", "directory for the report (.md, .json)")
	systems := fs.String("systems", "convene,janus,convene-rtp", "recorders to measure: convene (WebRTC publishers), janus (Debian's janus package, VideoRoom with record=true), convene-rtp (Convene fed plain RTP, as Voyager was; no Janus beside it)")
	rates := fs.String("rates", "128k,5M", "128k (audio-like, 50 packets/s × 320 bytes) and 5M (video-like, 520 packets/s × 1,200 bytes in frame bursts)")
	audioSteps := fs.String("steps", "100,200,300,400,500,600,800,1000,1200,1500,2000,2500,3000", "stream counts at 128 kb/s, in order; a series stops at the first that misses the bar")
	videoSteps := fs.String("video-steps", "5,10,20,30,40,50,60,80,100", "stream counts at 5 Mb/s, in order")
	audioRoom := fs.Int("room", 10, "streams in a room (session) at 128 kb/s")
	videoRoom := fs.Int("video-room", 5, "streams in a room (session) at 5 Mb/s")
	warmup := fs.Duration("warmup", 3*time.Second, "warm-up of each step before its window")
	window := fs.Duration("window", 10*time.Second, "measuring window of each step")
	grace := fs.Duration("grace", 5*time.Second, "how long after a window the recordings may take to hold all of it")
	janusRmem := fs.Int("janus-rmem", 4<<20, "net.core.rmem_default (bytes) while Janus runs, whose sockets take the default (0 leaves it)")
	budget := fs.Duration("budget", 42*time.Minute, "time for the whole run, shared equally by the series (system × rate)")
	serveArgs := fs.String("serve-args", "", "more flags for `convene serve`, space-separated")
	profile := fs.Bool("profile", false, "save a CPU profile of Convene over each step's window in -out")
	pin := fs.Bool("pin", runtime.NumCPU() >= 2, "give each server CPU 0 to itself and run the publishers and listeners on the other CPUs")
	nice := fs.Int("nice", -10, "niceness of both servers (negative needs root; 0 leaves it)")
	workers := fs.Int("workers", 0, "the load's sending goroutines (0: one per CPU)")
	note := fs.String("note", "", "a note for the report (the machine's state, say)")
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	server := conveneFlag(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	bin := conveneBin("recorder", *server, stderr)
	if bin == "" {
		return 1
	}
	steps, ok := intLists("recorder", map[string]string{"128k": *audioSteps, "5M": *videoSteps}, stderr)
	if !ok {
		return 2
	}
	h := holdBench("recorder", *wait, *out, stderr)
	if h == nil {
		return 1
	}
	defer h.release()
	res, err := recbench.Run(h.Ctx, recbench.Config{Convene: bin, Systems: strings.Split(*systems, ","), Shapes: strings.Split(*rates, ","),
		Steps: steps, PerRoom: map[string]int{"128k": *audioRoom, "5M": *videoRoom}, Warmup: *warmup, Window: *window, Grace: *grace, JanusReadBuffer: *janusRmem,
		Budget: *budget, Tmp: h.Tmp, Log: stdout, Out: *out, Profile: *profile, ServeArgs: strings.Fields(*serveArgs), Pin: *pin, Nice: *nice,
		Workers: *workers, Notes: nonEmpty(*note)})
	return report("recorder", stdout, stderr, err, func() (string, error) { return recbench.Write(*out, res) },
		func() string { return recbench.Format(res) })
}
