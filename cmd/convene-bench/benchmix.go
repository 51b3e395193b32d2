package main

import (
	"flag"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/convene/convene/internal/bench/mixbench"
)

// benchMixCmd measures audio mixing beside Janus AudioBridge and writes
// <out>/<date>-mixer.md and .json.
func benchMixCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mixer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/results", "directory for the report (.md, .json)")
	systems := fs.String("systems", "convene,janus", "mixers to measure: convene, janus (Debian's janus package, AudioBridge)")
	codecs := fs.String("codecs", "g711,opus", "g711 (PCMU, 8 kHz rooms) and opus (48 kHz rooms)")
	g711Steps := fs.String("steps", "25,50,75,100,150,200,300,400,500,600,800", "G.711 session counts (10 members, 6 speaking), in order; a series stops at the first that misses the bar")
	opusSteps := fs.String("opus-steps", "4,6,8,10,12,15,20,25,30,40,50", "Opus session counts, in order (Opus costs each server about 20 times G.711)")
	warmup := fs.Duration("warmup", 3*time.Second, "warm-up of each step before its window")
	window := fs.Duration("window", 20*time.Second, "measuring window of each step")
	budget := fs.Duration("budget", 30*time.Minute, "time for the whole run, shared equally by the series (system × codec)")
	serveArgs := fs.String("serve-args", "", "more flags for `convene serve`, space-separated (e.g. \"-mixer-cores 0.8\" to measure with the node's default admission)")
	profile := fs.Bool("profile", false, "save a CPU profile of Convene over each step's window in -out")
	pin := fs.Bool("pin", runtime.NumCPU() >= 2, "give each server CPU 0 to itself and run the members on the other CPUs")
	nice := fs.Int("nice", -10, "niceness of both servers (negative needs root; 0 leaves it)")
	note := fs.String("note", "", "a note for the report (the machine's state, say)")
	wait := fs.Bool("wait", false, "wait for a running benchmark to finish instead of refusing to start")
	server := conveneFlag(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	bin := conveneBin("mixer", *server, stderr)
	if bin == "" {
		return 1
	}
	steps, ok := intLists("mixer", map[string]string{"g711": *g711Steps, "opus": *opusSteps}, stderr)
	if !ok {
		return 2
	}
	h := holdBench("mixer", *wait, *out, stderr)
	if h == nil {
		return 1
	}
	defer h.release()
	res, err := mixbench.Run(h.Ctx, mixbench.Config{Convene: bin, Systems: strings.Split(*systems, ","), Codecs: strings.Split(*codecs, ","),
		Steps: steps, Warmup: *warmup, Window: *window, Budget: *budget, Tmp: h.Tmp, Log: stdout, Out: *out, Profile: *profile,
		ServeArgs: strings.Fields(*serveArgs), Pin: *pin, Nice: *nice, Notes: nonEmpty(*note)})
	return report("mixer", stdout, stderr, err, func() (string, error) { return mixbench.Write(*out, res) },
		func() string { return mixbench.Format(res) })
}
